// The optional admin listener: /metrics, /spec and the health report on a port of their own; the public
// port then answers /metrics and /spec 404 and keeps /healthcheck for load balancers.
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

t.test('admin: { port: 0 } serves the built-ins apart from the public port', async (t) => {
  const app = await startUpstream(t, { name: 'app' });
  const gateway = await startGateway(t, {
    config: testConfig(
      [{ serviceType: 'static', serviceLocation: app.location, endpoints: [{ method: 'GET', path: '/items/{id}' }, { method: 'GET', path: '/metrics' }] }],
      { admin: { host: '127.0.0.1', port: 0 } },
    ),
    waitFor: (line) => line.msg === 'gateway operational',
  });
  const listening = await gateway.waitForLog((line) => line.msg === 'admin listener listening', 5000, 'admin listener');
  const adminPort = Number(listening.port);
  t.ok(adminPort > 0 && adminPort !== gateway.port, `admin on ${adminPort}`);

  t.equal((await httpRequest(gateway.port, '/items/1')).status, 200, 'public port routes as usual');
  const publicHealth = await httpRequest(gateway.port, '/healthcheck');
  t.equal(publicHealth.status, 200, 'the health check stays public');
  for (const path of ['/metrics', '/spec', '/spec?format=openapi3']) {
    const res = await httpRequest(gateway.port, path);
    t.equal(res.status, 404, `public ${path}: 404`);
    t.equal(res.headers['content-type'], 'application/problem+json');
  }
  t.equal(app.seen.get('GET /metrics'), undefined, 'an upstream declaring /metrics is not reached either: the built-in path wins');

  const metrics = await eventually(async () => {
    const res = await httpRequest(adminPort, '/metrics');
    const body = JSON.parse(res.body) as { requests?: { total: number } };
    return res.status === 200 && (body.requests?.total ?? 0) >= 2 ? body : undefined;
  }, 5000);
  t.ok(metrics.requests!.total >= 2, 'admin /metrics counts the public traffic');
  const spec = await httpRequest(adminPort, '/spec');
  t.equal(spec.status, 200);
  t.equal((JSON.parse(spec.body) as { swagger: string }).swagger, '2.0');
  const health = await httpRequest(adminPort, '/healthcheck');
  t.equal(health.status, 200);
  t.same(JSON.parse(health.body).upstreams, JSON.parse(publicHealth.body).upstreams, 'the same health report');
  const other = await httpRequest(adminPort, '/items/1');
  t.equal(other.status, 404, 'nothing else on the admin listener');
  t.equal(app.seen.get('GET /items/1'), 1, 'and nothing is proxied from it');
});
