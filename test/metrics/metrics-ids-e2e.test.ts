// Middleware and listener ids are config strings: one with a dot, or named like a property of
// Object.prototype, is counted under its own name in /metrics, JSON and Prometheus alike, and the
// primary that renders the report keeps running.
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { parsePrometheus, sampleValue } from '../helpers/prometheus.js';

type Counts = { admitted?: number; rejected?: Record<string, number>; slaMisses?: number };

const main = await startUpstream(t, { name: 'main' });
const shadow = await startUpstream(t, { name: 'shadow' });
const gateway = await startGateway(t, {
  config: testConfig([{ serviceType: 'static', serviceLocation: main.location, endpoints: [{ method: 'GET', path: '/r/{id}' }] }], {
    middleware: [
      { id: '__proto__', type: 'rateLimit', limit: 1000, windowMs: 60_000, slaMs: 5000 },
      { id: 'constructor', type: 'rateLimit', limit: 1000, windowMs: 60_000, slaMs: 5000 },
      { id: 'limit', type: 'rateLimit', limit: 1000, windowMs: 60_000, slaMs: 5000 },
      { id: 'limit.v2', type: 'rateLimit', limit: 2, windowMs: 60_000, slaMs: 5000 },
    ],
    listeners: [{ id: 'shadow.v2', type: 'alternateUpstream', serviceLocation: shadow.location, sample: 1, mismatchLog: null }],
  }),
  waitFor: (line) => line.msg === 'gateway operational',
});

/** An own property of a parsed JSON object (`report.middleware.__proto__` would be Object.prototype). */
function own(tree: unknown, key: string): Counts | undefined {
  return Object.getOwnPropertyDescriptor(tree, key)?.value as Counts | undefined;
}

t.test('ids with dots and prototype names: counted as given, and the gateway keeps serving', async (t) => {
  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) statuses.push((await httpRequest(gateway.port, `/r/${i}`)).status);
  const admitted = statuses.filter((s) => s === 200).length;
  const rejected = statuses.filter((s) => s === 429).length;
  t.equal(admitted + rejected, 6, `every request admitted or limited: ${statuses.join(' ')}`);
  t.ok(rejected > 0, 'limit.v2 refused some');

  // Each worker ships its own counts (every 200 ms), and the two /metrics reads below may reach different
  // workers, each with the report the primary last gave it: wait until each read counts all six
  // requests for every middleware (each one admitted, rejected or past its SLA), and the listener's
  // first shadow request. The rejections alone could all come from one worker while the other
  // worker's admissions were still on their way.
  const ids = ['__proto__', 'constructor', 'limit', 'limit.v2'];
  const sum = (values: number[]): number => values.reduce((a, b) => a + b, 0);
  const decided = (counts: Counts | undefined): number => (counts?.admitted ?? 0) + sum(Object.values(counts?.rejected ?? {})) + (counts?.slaMisses ?? 0);
  const { report, text } = await eventually(
    async () => {
      const res = await httpRequest(gateway.port, '/metrics');
      const report = JSON.parse(res.body) as { middleware?: unknown; listeners?: unknown };
      const text = (await httpRequest(gateway.port, '/metrics', { headers: { accept: 'text/plain' } })).body;
      const families = parsePrometheus(text);
      const ofMiddleware = (family: string, id: string): number => sum((families.get(family)?.samples ?? []).filter((s) => s.labels.middleware === id).map((s) => s.value));
      const inJson = ids.every((id) => decided(own(report.middleware, id)) === 6) && ((own(report.listeners, 'shadow.v2') as { sent?: number } | undefined)?.sent ?? 0) > 0;
      const inText =
        ids.every((id) => sum(['admitted', 'answers', 'sla_misses'].map((event) => ofMiddleware(`gateway_middleware_${event}_total`, id))) === 6) &&
        (sampleValue(families, 'gateway_listener_sent_total', 'gateway_listener_sent_total', { listener: 'shadow.v2' }) ?? 0) > 0;
      return inJson && inText ? { report, text } : undefined;
    },
    5000,
    50,
    'every request counted by every middleware in /metrics, JSON and Prometheus',
  );
  t.same(Object.keys(report.middleware as object).sort(), ['__proto__', 'constructor', 'limit', 'limit.v2']);
  t.same(own(report.middleware, '__proto__'), { admitted: 6 });
  t.same(own(report.middleware, 'constructor'), { admitted: 6 });
  t.same(own(report.middleware, 'limit'), { admitted: 6 }, 'limit and limit.v2 are two entries, not one subtree');
  t.same(own(report.middleware, 'limit.v2'), { admitted, rejected: { 429: rejected } });
  t.same(Object.keys(report.listeners as object), ['shadow.v2']);

  const families = parsePrometheus(text);
  const answers = (labels: Record<string, string>) => sampleValue(families, 'gateway_middleware_answers_total', 'gateway_middleware_answers_total', labels);
  const admittedBy = (id: string) => sampleValue(families, 'gateway_middleware_admitted_total', 'gateway_middleware_admitted_total', { middleware: id });
  t.equal(answers({ middleware: 'limit.v2', outcome: 'rejected', status: '429' }), rejected);
  t.equal(admittedBy('limit.v2'), admitted);
  for (const id of ['__proto__', 'constructor', 'limit']) t.equal(admittedBy(id), 6, `admitted by ${id}`);
  t.ok((sampleValue(families, 'gateway_listener_sent_total', 'gateway_listener_sent_total', { listener: 'shadow.v2' }) ?? 0) > 0, 'shadow.v2 series');
  t.notMatch(text, /middleware="limit",outcome=/, 'no series splits limit.v2 at its dot');

  // Rendering the report used to write into Object.prototype of the primary, whose GC metrics then
  // threw and took it down: keep it rendering for a while and check it still answers.
  const statusesAfter = new Set<number>();
  for (const until = Date.now() + 2000; Date.now() < until; ) {
    statusesAfter.add((await httpRequest(gateway.port, '/metrics', { headers: { accept: 'text/plain' } })).status);
  }
  t.same([...statusesAfter], [200], '/metrics answered 200 throughout');
  t.equal((await httpRequest(gateway.port, '/r/9')).status, 429);
  t.equal((await httpRequest(gateway.port, '/healthcheck')).status, 200);
  t.equal(gateway.child.exitCode, null, 'the primary is running');
});
