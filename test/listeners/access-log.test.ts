// The accessLog listener: one JSON line per request, skipped where an endpoint disables it, off when
// disabled in the config, and nothing lost on shutdown.
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig, type LogLine } from '../helpers/gateway-process.js';

const upstream = await startUpstream(t, { name: 'app' });
const endpoints = [
  { method: 'GET', path: '/logged/{id}' },
  { method: 'POST', path: '/logged/{id}' },
  { method: 'GET', path: '/quiet', 'x-disabled-listeners': ['accessLog'] },
];

t.test('one line per request with the documented fields', async (t) => {
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints }], { trustedProxies: ['127.0.0.1'] }),
    waitFor: (line) => line.msg === 'gateway operational',
  });
  await httpRequest(gateway.port, '/logged/7?x=1', { headers: { 'x-forwarded-for': '198.51.100.1, 203.0.113.9' } });
  await httpRequest(gateway.port, '/logged/8', { method: 'POST', body: 'hello', headers: { 'content-type': 'text/plain' } });
  await httpRequest(gateway.port, '/quiet');
  await httpRequest(gateway.port, '/missing');

  const lines = await eventually(
    async () => {
      const lines = gateway.accessLines();
      // Each worker flushes its own lines: wait for the three, not for a count.
      return ['/logged/7', '/logged/8', '/missing'].every((path) => lines.some((l) => l.path === path)) ? lines : undefined;
    },
    3000,
    50,
    'the access lines of /logged/7, /logged/8 and /missing',
  );
  const byPath = (path: string): LogLine | undefined => lines.find((l) => l.path === path);
  const get = byPath('/logged/7')!;
  t.match(get, {
    log: 'access',
    role: 'worker',
    method: 'GET',
    status: 200,
    endpoint: '/logged/{id}',
    upstream: upstream.location,
    bytesIn: 0,
    client: '203.0.113.9',
  });
  t.type(get.time, 'number');
  t.type(get.pid, 'number');
  t.type(get.latencyMs, 'number');
  t.ok((get.bytesOut as number) > 0);
  t.match(byPath('/logged/8'), { method: 'POST', status: 200, bytesIn: 5, client: '127.0.0.1' });
  t.match(byPath('/missing'), { status: 404, endpoint: null, upstream: null });
  t.equal(byPath('/quiet'), undefined, 'an endpoint with x-disabled-listeners: [accessLog] is not logged');
  t.equal(upstream.seen.get('GET /quiet'), 1, 'though it was served');
});

t.test('buffered lines are written out on shutdown', async (t) => {
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints }]),
    waitFor: (line) => line.msg === 'gateway operational',
  });
  const N = 30;
  for (let i = 0; i < N; i++) await httpRequest(gateway.port, `/logged/${i}`);
  gateway.signal('SIGTERM');
  t.same(await gateway.exited, { code: 0, signal: null });
  t.equal(gateway.accessLines().filter((l) => String(l.path).startsWith('/logged/')).length, N);
});

t.test('accessLog.enabled: false logs nothing and lists no listener', async (t) => {
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints }], { accessLog: { enabled: false } }),
    waitFor: (line) => line.msg === 'gateway operational',
  });
  for (let i = 0; i < 5; i++) t.equal((await httpRequest(gateway.port, `/logged/${i}`)).status, 200);
  const health = JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body);
  t.same(health.listeners, { pending: [], ready: [] });
  gateway.signal('SIGTERM');
  await gateway.exited;
  t.same(gateway.accessLines(), []);
});
