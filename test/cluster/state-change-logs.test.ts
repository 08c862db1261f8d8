// State changes are logged where they happen, with the reason: a Redis store down and back; an
// upstream that failed discovery and is discovered later. While an upstream is not discovered, a 404
// says so in its detail (else it reads as a typo in the path).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, swaggerDoc, testConfig } from '../helpers/gateway-process.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { createClient } from 'redis';

const app = await startUpstream(t, { name: 'app' });

t.test('a Redis store that goes down and comes back: one log line each, with the reason', async (t) => {
  const redis = await startRedisServer();
  t.teardown(() => redis.stop());
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: app.location, endpoints: [{ method: 'GET', path: '/limited/{id}' }] }], {
      accessLog: { enabled: false },
      kvStores: { shared: { type: 'redis', url: redis.url, keyPrefix: 'logtest:', commandTimeoutMs: 50, breakerResetMs: 300 } },
      middleware: [{ id: 'limit', type: 'rateLimit', limit: 1000, windowMs: 60_000, store: 'shared', onStoreError: 'allow', slaMs: 200 }],
    }),
    workers: 1,
    waitFor: (l) => l.msg === 'gateway operational',
    startTimeoutMs: 60_000,
  });
  await gateway.waitForLog((l) => l.msg === 'store "shared" is ready', 10_000, 'the store ready');
  await redis.kill();
  const down = await eventually(
    async () => {
      await httpRequest(gateway.port, '/limited/1');
      return gateway.lines.find((l) => /^store "shared" is down: /.test(String(l.msg)));
    },
    20_000,
    100,
    "a 'store is down' line",
  );
  t.equal(down.level, 40, 'a warning');
  t.match(down, { store: 'shared', state: 'down', previous: 'ready' });
  t.ok(String(down.reason).length > 0, `with the reason: ${String(down.reason)}`);
  t.notMatch(JSON.stringify(down), /password/);
  await redis.restart();
  const back = await eventually(
    async () => {
      await httpRequest(gateway.port, '/limited/1');
      return gateway.lines.find((l) => l.msg === 'store "shared" is back');
    },
    20_000,
    100,
    "a 'store is back' line",
  );
  t.match(back, { level: 30, store: 'shared', state: 'ready', previous: 'down' });
  t.notOk('reason' in back, 'the back line carries no reason (the failure is over)');
  t.equal(gateway.lines.filter((l) => /^store "shared" is down/.test(String(l.msg))).length, 1, 'one line per change, not per request');
});

t.test('a store that stays down for a new reason (a password Redis now refuses) logs it once; back without traffic', async (t) => {
  const redis = await startRedisServer();
  t.teardown(() => redis.stop());
  // Connected before the password is set: this connection stays authenticated.
  const control = createClient({ url: redis.url });
  control.on('error', () => {});
  await control.connect();
  t.teardown(() => control.quit().catch(() => {}));
  await control.sendCommand(['CONFIG', 'SET', 'requirepass', 'first']);
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: app.location, endpoints: [{ method: 'GET', path: '/limited/{id}' }] }], {
      accessLog: { enabled: false },
      kvStores: { shared: { type: 'redis', url: redis.url.replace('//', '//:first@'), keyPrefix: 'logtest:', commandTimeoutMs: 50, breakerResetMs: 300 } },
      middleware: [{ id: 'limit', type: 'rateLimit', limit: 1000, windowMs: 60_000, store: 'shared', onStoreError: 'allow', slaMs: 200 }],
    }),
    workers: 1,
    waitFor: (l) => l.msg === 'gateway operational',
    startTimeoutMs: 60_000,
  });
  await gateway.waitForLog((l) => l.msg === 'store "shared" is ready', 20_000, 'the store ready');

  // Down (a connection lost), then, while down, Redis refuses the password: a new reason.
  await control.sendCommand(['CONFIG', 'SET', 'requirepass', 'second']);
  await control.sendCommand(['CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes']);
  const down = await gateway.waitForLog((l) => /^store "shared" is (still )?down: /.test(String(l.msg)), 10_000, "a 'store is down' line");
  t.match(down, { level: 40, state: 'down' });
  const isWrongPass = (l: Record<string, unknown>) => /WRONGPASS/.test(String(l.reason));
  const wrongPass = isWrongPass(down) ? down : await gateway.waitForLog((l) => l.msg === `store "shared" is still down: ${String(l.reason)}` && isWrongPass(l), 10_000, 'the new reason logged');
  t.match(wrongPass, { level: 40, state: 'down', reason: /^connection: WRONGPASS/ });
  await new Promise((resolve) => setTimeout(resolve, 1500));
  t.equal(gateway.lines.filter((l) => l.store === 'shared' && isWrongPass(l)).length, 1, 'once, however often the store retries');

  await control.sendCommand(['CONFIG', 'SET', 'requirepass', 'first']);
  const back = await gateway.waitForLog((l) => l.msg === 'store "shared" is back', 10_000, "a 'store is back' line, no request sent");
  t.notOk('reason' in back, 'without the old reason');
});

t.test('an upstream down at start: 404s say it is not discovered; discovered later, logged with what failed before', async (t) => {
  // A port nothing listens on yet; the late upstream takes it later.
  const late = createServer((req, res) => {
    if (req.url === '/spec') {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify(swaggerDoc('late', { '/late/{id}': ['GET'] })));
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"upstream":"late"}');
  });
  await new Promise<void>((resolve) => late.listen(0, '127.0.0.1', resolve));
  const port = (late.address() as AddressInfo).port;
  await new Promise<void>((resolve) => late.close(() => resolve()));
  t.teardown(() => new Promise<void>((resolve) => (late.listening ? late.close(() => resolve()) : resolve())));

  const gateway = await startGateway(t, {
    config: testConfig(
      [
        { serviceType: 'static', serviceLocation: app.location, endpoints: [{ method: 'GET', path: '/here' }] },
        { serviceType: 'swagger2', serviceLocation: `http://127.0.0.1:${port}`, specPath: '/spec' },
      ],
      { discovery: { fetchTimeoutMs: 1000, retries: 0, backoffMs: 100, refreshIntervalMs: 1000 } },
    ),
    workers: 1,
    waitFor: (l) => l.msg === 'upstream discovery failed',
    startTimeoutMs: 60_000,
  });
  const failed = gateway.lines.find((l) => l.msg === 'upstream discovery failed')!;
  t.match(failed, { level: 50, upstream: `http://127.0.0.1:${port}` });
  t.ok(String(failed.reason).length > 0, `with the reason: ${String(failed.reason)}`);
  const missing = await eventually(
    async () => {
      const res = await httpRequest(gateway.port, '/late/1');
      return res.status === 404 && /not discovered/.test(res.body) ? res : undefined;
    },
    20_000,
    100,
    'a 404 that says an upstream is not discovered',
  );
  const problem = JSON.parse(missing.body) as { detail: string };
  t.equal(problem.detail, 'no endpoint matches this path, but 1 upstream is not discovered yet (pending or failed), so its endpoints are not routed');
  t.notMatch(problem.detail, String(port), 'the upstream is not named to clients');

  await new Promise<void>((resolve) => late.listen(port, '127.0.0.1', resolve));
  const discovered = await gateway.waitForLog((l) => l.msg === 'upstream discovered on re-discovery', 20_000, 'the upstream discovered later');
  t.match(discovered, { upstream: `http://127.0.0.1:${port}`, previousError: failed.reason });
  const served = await eventually(
    async () => {
      const res = await httpRequest(gateway.port, '/late/1');
      return res.status === 200 ? res : undefined;
    },
    20_000,
    100,
    'the late upstream routed',
  );
  t.equal(JSON.parse(served.body).upstream, 'late');
  const plain = await httpRequest(gateway.port, '/nowhere');
  t.equal(JSON.parse(plain.body).detail, 'no endpoint matches this path', 'every upstream discovered: the plain 404');
});
