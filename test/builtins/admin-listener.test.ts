// The optional admin listener: /metrics, /spec and the health report on a port of their own; the public
// port then answers /metrics and /spec 404 and keeps /healthcheck for load balancers.
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { reloadWith } from '../helpers/reload.js';

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
  const announced = await gateway.waitForLog((line) => line.msg === 'gateway listening', 1000, "'gateway listening'");
  t.equal(Number(announced.adminPort), adminPort, "the port picked for admin is in 'gateway listening' with the public one");
  t.equal(announced.adminHost, '127.0.0.1');

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

t.test('port 0 and admin.port 0 in the file: a reload of the same file changes nothing and warns of nothing', async (t) => {
  const app = await startUpstream(t, { name: 'app' });
  const config = testConfig([{ serviceType: 'static', serviceLocation: app.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }], {
    port: 0,
    admin: { host: '127.0.0.1', port: 0 },
  });
  const gateway = await startGateway(t, { config, port: null, workers: 1, waitFor: (line) => line.msg === 'gateway operational' });
  const adminPort = Number((await gateway.waitForLog((line) => line.msg === 'admin listener listening', 5000, 'admin listener')).port);
  const status = await reloadWith(gateway, config, { metricsPort: adminPort });
  t.match(status, { ok: true, applied: true });
  t.same(status.warnings ?? [], [], 'the ports picked at start are what 0 asks for: nothing "changes on restart only"');
  t.notOk(
    gateway.lines.some((line) => line.msg === 'these settings change on restart only; their current values stay'),
    'and no warning is logged',
  );
  t.equal((await httpRequest(gateway.port, '/items/1')).status, 200, 'the public port serves on');
  t.equal((await httpRequest(adminPort, '/metrics')).status, 200, 'so does the admin listener');
});

const GENERATED = /^[0-9a-f]{16}-[0-9a-z]+$/;

t.test("the admin listener's answers carry a request ID like every other answer; its requests are not counted", async (t) => {
  const app = await startUpstream(t, { name: 'app' });
  const config = (overrides: Record<string, unknown>) =>
    testConfig([{ serviceType: 'static', serviceLocation: app.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }], { admin: { host: '127.0.0.1', port: 0 }, ...overrides });
  const untrusted = await startGateway(t, { config: config({}), waitFor: (line) => line.msg === 'gateway operational', workers: 1 });
  const adminPort = Number((await untrusted.waitForLog((line) => line.msg === 'admin listener listening', 5000, 'admin listener')).port);
  const ids = new Set<string>();
  for (const [method, path, status] of [
    ['GET', '/metrics', 200],
    ['GET', '/metrics?format=prometheus', 200],
    ['GET', '/healthcheck', 200],
    ['HEAD', '/healthcheck', 200],
    ['GET', '/spec', 200],
    ['OPTIONS', '/metrics', undefined],
    ['GET', '/nowhere', 404],
    ['HEAD', '/nowhere', 404],
  ] as const) {
    const res = await httpRequest(adminPort, path, { method, headers: { 'x-request-id': 'from-the-client' } });
    if (status !== undefined) t.equal(res.status, status, `${method} ${path}`);
    const id = String(res.headers['x-request-id']);
    t.match(id, GENERATED, `${method} ${path} (${res.status}): the gateway's ID, not an untrusted peer's`);
    ids.add(id);
  }
  t.equal(ids.size, 8, 'a new one each time');

  const before = JSON.parse((await httpRequest(adminPort, '/metrics')).body) as { requests: { total: number } };
  for (let i = 0; i < 5; i++) await httpRequest(adminPort, '/healthcheck');
  await new Promise((resolve) => setTimeout(resolve, 1500));
  const after = JSON.parse((await httpRequest(adminPort, '/metrics')).body) as { requests: { total: number } };
  t.equal(after.requests.total, before.requests.total, "the admin listener's requests are not counted in /metrics");

  const trusted = await startGateway(t, {
    config: config({ trustedProxies: ['127.0.0.1'], requestId: { header: 'X-Correlation-Id' } }),
    waitFor: (line) => line.msg === 'gateway operational',
    workers: 1,
  });
  const trustedAdmin = Number((await trusted.waitForLog((line) => line.msg === 'admin listener listening', 5000, 'admin listener')).port);
  const kept = await httpRequest(trustedAdmin, '/healthcheck', { headers: { 'x-correlation-id': 'lb-probe-42' } });
  t.equal(kept.headers['x-correlation-id'], 'lb-probe-42', "a trusted proxy's ID is kept, in the configured header");
  t.notOk('x-request-id' in kept.headers);
  const made = await httpRequest(trustedAdmin, '/nowhere');
  t.match(made.headers['x-correlation-id'], GENERATED, 'none sent: one is made');

  const off = await startGateway(t, { config: config({ requestId: { enabled: false } }), waitFor: (line) => line.msg === 'gateway operational', workers: 1 });
  const offAdmin = Number((await off.waitForLog((line) => line.msg === 'admin listener listening', 5000, 'admin listener')).port);
  t.notOk('x-request-id' in (await httpRequest(offAdmin, '/metrics')).headers, 'request IDs off: none');
});

t.test('the admin listener matches the built-ins after the public port\'s path normalization, and refuses what it refuses', async (t) => {
  const app = await startUpstream(t, { name: 'app' });
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: app.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }], { admin: { host: '127.0.0.1', port: 0 } }),
    waitFor: (line) => line.msg === 'gateway operational',
    workers: 1,
  });
  const adminPort = Number((await gateway.waitForLog((line) => line.msg === 'admin listener listening', 5000, 'admin listener')).port);
  for (const path of ['/%68ealthcheck', '/./healthcheck', '/x/../healthcheck', '/healthcheck/', '/%68ealthcheck/.']) {
    t.equal((await httpRequest(gateway.port, path)).status, 200, `public ${path}`);
    t.equal((await httpRequest(adminPort, path)).status, 200, `admin ${path}: the same health report`);
  }
  for (const path of ['/%6Detrics', '/./metrics', '/spec/../metrics', '/%73pec']) {
    t.equal((await httpRequest(adminPort, path)).status, 200, `admin ${path}`);
  }
  t.equal((await httpRequest(adminPort, '/%68ealthcheck', { method: 'HEAD' })).status, 200, 'HEAD too');
  for (const path of ['/%zzhealthcheck', '/../healthcheck', '/healthcheck/%2F']) {
    const pub = await httpRequest(gateway.port, path);
    const admin = await httpRequest(adminPort, path);
    t.equal(pub.status, 400, `public ${path}: 400`);
    t.equal(admin.status, pub.status, `admin ${path}: what the public port gives`);
    t.equal(admin.headers['content-type'], 'application/problem+json');
    t.equal(JSON.parse(admin.body).detail, JSON.parse(pub.body).detail, `admin ${path}: the same detail`);
  }
  t.equal((await httpRequest(adminPort, '/%69tems/1')).status, 404, 'a normalized non-built-in path is still 404 there');
});

t.test('a worker that stops answers the /metrics request in flight on the admin listener before it closes it', async (t) => {
  const app = await startUpstream(t, { name: 'app' });
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: app.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }], { admin: { host: '127.0.0.1', port: 0 } }),
    waitFor: (line) => line.msg === 'gateway operational',
    workers: 1,
  });
  const listening = await gateway.waitForLog((line) => line.msg === 'admin listener listening', 5000, 'admin listener');
  const adminPort = Number(listening.port);
  t.equal((await httpRequest(adminPort, '/metrics')).status, 200);
  // A worker asks the primary for /metrics: with the primary stopped, the request stays in flight
  // until the worker's ask times out (2 s) and it answers 503.
  gateway.signal('SIGSTOP');
  t.teardown(() => gateway.signal('SIGCONT'));
  // Keep-alive asked for: uWS says Connection: close only to a client that did not say it first.
  const answer = httpRequest(adminPort, '/metrics', { headers: { connection: 'keep-alive' } });
  await new Promise((resolve) => setTimeout(resolve, 300));
  process.kill(Number(listening.pid), 'SIGTERM');
  const res = await answer;
  t.equal(res.status, 503, 'the request in flight is answered (the primary did not give the metrics), not cut');
  t.equal(res.headers.connection, 'close', 'with Connection: close, the worker being on its way out');
  gateway.signal('SIGCONT');
});
