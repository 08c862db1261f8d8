// /metrics is asked of the primary per request (src/cluster/metrics-asker.ts, metrics-hub.ts): a
// running gateway (2 workers) answers concurrent scrapes in both formats with the merged report, and
// counts a worker's own requests at once. A primary that does not answer (stopped with SIGSTOP) costs
// a /metrics request a 503 problem after the asker's bound, never a hang, and nothing else: routed
// requests and /healthcheck are answered by the workers alone. Once it runs again, /metrics is 200.
import { Agent, request } from 'node:http';
import t from 'tap';
import { httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

const upstream = await startUpstream(t, { name: 'a' });
const gateway = await startGateway(t, {
  config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }]),
  waitFor: (line) => line.msg === 'gateway operational',
});

t.test('concurrent scrapes in both formats get the merged report', async (t) => {
  for (let i = 0; i < 10; i++) t.equal((await httpRequest(gateway.port, `/items/${i}`)).status, 200);
  const scrapes = await Promise.all(
    Array.from({ length: 24 }, (_, i) => httpRequest(gateway.port, '/metrics', { headers: { accept: i % 2 === 0 ? 'application/json' : 'text/plain' } })),
  );
  for (const [i, res] of scrapes.entries()) {
    t.equal(res.status, 200, `scrape ${i}`);
    if (i % 2 === 0) t.ok(JSON.parse(res.body).workers >= 1, 'a JSON report');
    else t.match(res.body, /^# HELP gateway_/m, 'a Prometheus text');
  }
});

t.test("a worker's own requests are counted in the /metrics it answers at once", async (t) => {
  // One keep-alive connection: the same worker serves the requests and the scrapes.
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  t.teardown(() => agent.destroy());
  const get = (path: string): Promise<string> =>
    new Promise((resolve, reject) => {
      request({ host: '127.0.0.1', port: gateway.port, path, agent }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve(body));
      })
        .on('error', reject)
        .end();
    });
  const total = async (): Promise<number> => (JSON.parse(await get('/metrics')) as { requests: { total: number } }).requests.total;
  const before = await total();
  for (let i = 0; i < 5; i++) await get(`/items/${i}`);
  t.ok((await total()) >= before + 5, 'the five requests are in the next scrape');
});

t.test('a primary that does not answer: /metrics is a 503 problem in about two seconds, nothing else waits', async (t) => {
  gateway.signal('SIGSTOP');
  try {
    const started = Date.now();
    const [metrics, routed, health] = await Promise.all([
      httpRequest(gateway.port, '/metrics').then((res) => ({ ...res, ms: Date.now() - started })),
      httpRequest(gateway.port, '/items/1').then((res) => ({ ...res, ms: Date.now() - started })),
      httpRequest(gateway.port, '/healthcheck').then((res) => ({ ...res, ms: Date.now() - started })),
    ]);
    t.equal(metrics.status, 503);
    t.equal(metrics.headers['content-type'], 'application/problem+json');
    t.match(JSON.parse(metrics.body), { status: 503, detail: /primary/ });
    t.ok(metrics.ms >= 1500 && metrics.ms < 5000, `answered after the asker's bound (${metrics.ms} ms)`);
    t.equal(routed.status, 200, 'a routed request');
    t.equal(health.status, 200, '/healthcheck');
    t.ok(routed.ms < 1500 && health.ms < 1500, `both at once (${routed.ms}, ${health.ms} ms)`);
  } finally {
    gateway.signal('SIGCONT');
  }
  t.equal((await httpRequest(gateway.port, '/metrics')).status, 200, 'answered again once the primary runs');
});
