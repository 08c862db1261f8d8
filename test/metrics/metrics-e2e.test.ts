// /metrics merged across 2 workers: counts every request of a burst within a second of its end.
import { createRequire } from 'node:module';
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

interface AutocannonResult {
  requests: { total: number };
  errors: number;
  timeouts: number;
  non2xx: number;
  '2xx': number;
}
type Autocannon = (options: Record<string, unknown>) => Promise<AutocannonResult>;
const autocannon = createRequire(import.meta.url)('autocannon') as Autocannon;

type Series = { requests: number; byStatus: Record<string, number>; latencyMs: Record<string, number> };
type Report = {
  uptimeSeconds: number;
  workers: number;
  requests: { total: number; byStatus: Record<string, number>; inFlight: number };
  latencyMs: Record<string, number>;
  upstreams: Record<string, Series>;
  endpoints: Record<string, Series>;
};

const BURST = 10_000;

const a = await startUpstream(t, { name: 'a' });
const b = await startUpstream(t, { name: 'b' });
const endpoints = (only: string) => [
  { method: 'GET', path: '/items/{id}' },
  { method: 'GET', path: `/${only}` },
];
const gateway = await startGateway(t, {
  config: testConfig([
    { serviceType: 'static', serviceLocation: a.location, endpoints: endpoints('only-a') },
    { serviceType: 'static', serviceLocation: b.location, endpoints: endpoints('only-b') },
  ]),
  waitFor: (line) => line.msg === 'gateway operational',
});

async function metrics(): Promise<Report> {
  const res = await httpRequest(gateway.port, '/metrics');
  t.equal(res.status, 200);
  t.match(res.headers['content-type'], /^application\/json/);
  return JSON.parse(res.body) as Report;
}

function sum(counts: Record<string, number>): number {
  return Object.values(counts).reduce((n, c) => n + c, 0);
}

t.test(`a burst of ${BURST} requests is counted in full within a second`, async (t) => {
  const before = await metrics();
  const result = await autocannon({
    url: `http://127.0.0.1:${gateway.port}`,
    connections: 16,
    amount: BURST,
    requests: [{ path: '/items/1' }, { path: '/only-a' }, { path: '/only-b' }, { path: '/items/2' }],
  });
  const finishedAt = Date.now();
  t.equal(result.errors + result.timeouts, 0, 'no errors');
  t.equal(result['2xx'], BURST, 'every request succeeded');

  const report = await eventually(
    async () => {
      const report = await metrics();
      return report.upstreams[a.location]?.requests === a.total() && report.upstreams[b.location]?.requests === b.total()
        ? report
        : undefined;
    },
    3000,
    25,
    'metrics matching what the upstreams saw',
  );
  const lagMs = Date.now() - finishedAt;
  // "Within one second", by the gateway's own clock, so the stalls of this process on a busy machine
  // do not count: a report rendered a second or more after the burst finished must count it in full.
  // The report says when it was rendered (uptimeSeconds, from the primary's start, which is at most a
  // few ms before its 'gateway starting' line).
  const startedAt = Number(gateway.lines.find((l) => l.msg === 'gateway starting')!.time);
  const renderedAt = (r: Report): number => startedAt + r.uptimeSeconds * 1000;
  const aSecondLater = await eventually(async () => {
    const later = await metrics();
    return renderedAt(later) >= finishedAt + 1000 ? later : undefined;
  }, 5000, 100, 'a report rendered a second after the burst');
  t.same(
    [aSecondLater.upstreams[a.location]?.requests, aSecondLater.upstreams[b.location]?.requests],
    [a.total(), b.total()],
    `counted within a second (seen here after ${lagMs} ms; the report a second later counts it all)`,
  );

  t.equal(a.total() + b.total(), BURST, 'the upstreams saw the whole burst');
  t.ok(a.total() > BURST / 3 && b.total() > BURST / 3, 'both upstreams got their share');
  // Built-in requests (these /metrics probes) count too, so the total grows by at least the burst.
  const grew = report.requests.total - before.requests.total;
  t.ok(grew >= BURST && grew < BURST + 500, `the total grew by the burst (+${grew})`);
  t.equal(sum(report.requests.byStatus), report.requests.total, 'counts by status add up to the total');
  t.ok((report.requests.byStatus['200'] ?? 0) - (before.requests.byStatus['200'] ?? 0) >= BURST);
  t.equal(report.workers, 2);
  t.equal(report.requests.inFlight >= 0, true);
  for (const series of [report, report.upstreams[a.location]!, report.upstreams[b.location]!, report.endpoints['GET /items/{id}']!]) {
    const { p50, p90, p99, p999, max } = series.latencyMs;
    t.ok(p50! > 0 && p50! <= p90! && p90! <= p99! && p99! <= p999! && p999! <= max!, `percentiles ordered: ${JSON.stringify(series.latencyMs)}`);
  }
  const itemsSeen = [...a.seen, ...b.seen].filter(([key]) => key.startsWith('GET /items/')).reduce((n, [, c]) => n + c, 0);
  t.equal(report.endpoints['GET /only-a']!.requests, a.seen.get('GET /only-a'));
  t.equal(report.endpoints['GET /only-b']!.requests, b.seen.get('GET /only-b'));
  t.equal(report.endpoints['GET /items/{id}']!.requests, itemsSeen);
  t.equal(sum(report.upstreams[a.location]!.byStatus), a.total());
});

t.test('every worker answers with the same merged report', async (t) => {
  const totals = new Map<string, number>();
  await eventually(
    async () => {
      const res = await httpRequest(gateway.port, '/metrics');
      const report = JSON.parse(res.body) as Report;
      totals.set(String(res.headers['x-gateway-worker']), report.upstreams[a.location]!.requests);
      return totals.size >= 2 ? true : undefined;
    },
    5000,
    10,
    'answers from both workers',
  );
  t.same(new Set(totals.values()), new Set([a.total()]));
});

t.test('Prometheus text when asked for, and it parses', async (t) => {
  for (const options of [{ path: '/metrics?format=prometheus' }, { path: '/metrics', headers: { accept: 'text/plain' } }]) {
    const res = await httpRequest(gateway.port, options.path, { headers: options.headers });
    t.equal(res.status, 200);
    t.match(res.headers['content-type'], /^text\/plain; version=0\.0\.4/);
    t.ok(res.body.endsWith('\n'));
    const lines = res.body.slice(0, -1).split('\n');
    const sample = /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"(,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*\})? (-?\d+(\.\d+)?(e[+-]?\d+)?|NaN|\+Inf|-Inf)$/;
    const bad = lines.filter(
      (line) => !(/^# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .*$/.test(line) || /^# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (counter|gauge|summary|histogram|untyped)$/.test(line) || sample.test(line)),
    );
    t.same(bad, [], 'every line is a HELP, a TYPE or a sample');
    t.match(res.body, new RegExp(`gateway_requests_total\\{status="200"\\} \\d+`));
  }
  const refused = await httpRequest(gateway.port, '/metrics', { headers: { accept: 'image/png' } });
  t.equal(refused.status, 406);
});
