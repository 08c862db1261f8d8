// Middleware on a real Redis (docs/reference/stores.md#redis), through two running gateway instances: one rate limit shared
// by both, every key written with an expiry, Redis killed (onStoreError allow / deny, each request
// answered without waiting on Redis) and back (the limit applies again), a hung Redis skipped after
// slaMs and counted, and two instances serving each other's cached answers.
import t from 'tap';
import { createClient } from 'redis';
import { eventually, httpRequest, startGateway, startUpstream, testConfig, type GatewayProcess } from '../helpers/gateway-process.js';
import { startRedisServer } from '../helpers/redis-server.js';

const redis = await startRedisServer();
t.teardown(() => redis.stop());
const app = await startUpstream(t, {
  name: 'app',
  handle: (req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'public, max-age=60' });
    res.end(JSON.stringify({ path: req.url, at: Date.now() }));
  },
});

const endpoints = [
  { method: 'GET', path: '/limited/{id}', 'x-disabled-middleware': ['cache', 'strict'] },
  { method: 'GET', path: '/strict/{id}', 'x-disabled-middleware': ['cache', 'limit'] },
  { method: 'GET', path: '/cached/{id}', 'x-disabled-middleware': ['limit', 'strict'] },
];

function config() {
  return testConfig([{ serviceType: 'static', serviceLocation: app.location, endpoints }], {
    accessLog: { enabled: false },
    kvStores: {
      shared: { type: 'redis', url: redis.url, keyPrefix: 'gwtest:', commandTimeoutMs: 50, breakerResetMs: 300 },
      // The same Redis with a long command timeout: a hung Redis meets the cache's slaMs first.
      patient: { type: 'redis', url: redis.url, keyPrefix: 'gwtest:', commandTimeoutMs: 2000, breakerResetMs: 300 },
    },
    middleware: [
      { id: 'limit', type: 'rateLimit', limit: 10, windowMs: 60_000, store: 'shared', onStoreError: 'allow', slaMs: 200 },
      { id: 'strict', type: 'rateLimit', limit: 10, windowMs: 60_000, store: 'shared', onStoreError: 'deny', slaMs: 200 },
      { id: 'cache', type: 'responseCache', store: 'patient', slaMs: 300 },
    ],
  });
}

async function start(): Promise<GatewayProcess> {
  return startGateway(t, { config: config(), workers: 1, waitFor: (line) => line.msg === 'gateway operational' });
}

const [a, b] = await Promise.all([start(), start()]);
const client = createClient({ url: redis.url });
// Redis is killed on purpose below: this client's reconnect errors are expected.
client.on('error', () => {});
await client.connect();
t.teardown(() => client.quit().catch(() => {}));

async function timed(gateway: GatewayProcess, path: string): Promise<{ status: number; ms: number; headers: Record<string, unknown>; body: string }> {
  const started = performance.now();
  const res = await httpRequest(gateway.port, path);
  return { status: res.status, ms: performance.now() - started, headers: res.headers, body: res.body };
}

t.test('health: the middleware are ready; the Redis store is listed with its state', async (t) => {
  const first = JSON.parse((await httpRequest(a.port, '/healthcheck')).body);
  t.same(first.middleware, { pending: [], ready: ['limit', 'strict', 'cache'] });
  // Store states reach the primary with the workers' next metrics shipment.
  const health = await eventually(async () => {
    const body = JSON.parse((await httpRequest(a.port, '/healthcheck')).body);
    return body.kvStores?.shared?.state === 'ready' ? body : undefined;
  }, 10_000);
  t.match(health.kvStores, { local: { type: 'local', state: 'ready' }, shared: { type: 'redis', state: 'ready', readyWorkers: 1, workers: 1 } });
  t.match(health.kvStores.shared.url, /^redis:\/\/127\.0\.0\.1:\d+/);
});

t.test('two instances on one Redis share one limit; every key expires', async (t) => {
  const statuses: number[] = [];
  for (let i = 0; i < 10; i++) {
    statuses.push((await httpRequest(a.port, `/limited/${i}`)).status);
    statuses.push((await httpRequest(b.port, `/limited/${i}`)).status);
  }
  const admitted = statuses.filter((s) => s === 200).length;
  t.ok(admitted >= 10 && admitted <= 11, `${admitted} of 20 admitted across the two instances (limit 10)`);
  const keys: string[] = [];
  for await (const batch of client.scanIterator({ MATCH: 'gwtest:*', COUNT: 100 })) keys.push(...(Array.isArray(batch) ? batch : [batch]));
  t.ok(keys.length > 0, `${keys.length} keys in Redis`);
  for (const key of keys) {
    const ttl = await client.pTTL(key);
    if (!(ttl > 0)) t.fail(`${key} has no expiry (${ttl})`);
  }
  t.pass('every key has an expiry');
});

t.test('two instances serve each other\'s cached answers', async (t) => {
  const cacheKeys = async (): Promise<number> => {
    let count = 0;
    for await (const batch of client.scanIterator({ MATCH: 'gwtest:kv:*', COUNT: 100 })) count += Array.isArray(batch) ? batch.length : 1;
    return count;
  };
  const keysBefore = await cacheKeys();
  const before = app.total();
  // One Host for both, as a load balancer in front of the two would pass on: the host is part of the
  // key (test/cache/cache-origin-key.test.ts), and each instance's own address would be another.
  const site = { headers: { host: 'gw.test' } };
  const first = await httpRequest(a.port, '/cached/7', site);
  t.equal(first.headers['x-cache'], 'MISS');
  // The entry is written to Redis after A's answer is complete: ask B once it is there (asking B
  // earlier is a miss of B's own, which stores B's answer).
  await eventually(async () => ((await cacheKeys()) > keysBefore ? true : undefined), 10_000);
  const second = await httpRequest(b.port, '/cached/7', site);
  t.equal(second.headers['x-cache'], 'HIT');
  t.equal(second.body, first.body, 'the same answer, stored by the other instance');
  t.equal(app.total() - before, 1, 'the upstream answered once');
});

t.test('Redis killed: allow admits, deny answers 503, neither waits on Redis; back up, the limit applies again', async (t) => {
  await redis.kill();
  const allowed = [];
  const denied = [];
  for (let i = 0; i < 6; i++) {
    allowed.push(await timed(a, `/limited/outage-${i}`));
    denied.push(await timed(b, `/strict/outage-${i}`));
  }
  t.same([...new Set(allowed.map((r) => r.status))], [200], 'onStoreError allow: admitted');
  t.same([...new Set(denied.map((r) => r.status))], [503], 'onStoreError deny: 503');
  // slaMs is 200: a generous bound that still fails if a request waited on a connect or a retry loop.
  const slowest = Math.max(...allowed.map((r) => r.ms), ...denied.map((r) => r.ms));
  t.ok(slowest < 2000, `slowest answer ${slowest.toFixed(0)} ms`);
  const health = await eventually(async () => {
    const body = JSON.parse((await httpRequest(a.port, '/healthcheck')).body);
    return body.kvStores.shared.state !== 'ready' ? body : undefined;
  }, 5000);
  t.match(health.kvStores.shared, { state: /down|connecting/ });
  t.equal((await httpRequest(a.port, '/healthcheck')).status, 200, 'health stays 200');

  await redis.restart();
  const limited = await eventually(
    async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 12; i++) statuses.push((await httpRequest(a.port, `/strict/after-${i}`)).status);
      return statuses.includes(429) && !statuses.includes(503) ? statuses : undefined;
    },
    10_000,
    300,
    'the limit back',
  );
  t.ok(limited.includes(429), `after Redis is back: ${limited.join(',')}`);
  // Counters reach /metrics with the workers' next shipment (every 200 ms) and the primary's next report.
  const storeErrors = await eventually(
    async () => {
      const metrics = JSON.parse((await httpRequest(b.port, '/metrics')).body);
      const count = metrics.middleware?.strict?.storeErrors;
      return typeof count === 'number' && count >= 6 ? count : undefined;
    },
    5000,
    100,
    'store errors in /metrics',
  );
  t.ok(storeErrors >= 6, `store errors counted (${storeErrors})`);
});

t.test('a hung Redis: the cache is skipped after its slaMs and the miss counted', async (t) => {
  const pauser = createClient({ url: redis.url });
  pauser.on('error', () => {});
  await pauser.connect();
  t.teardown(() => pauser.quit().catch(() => {}));
  // Until an entry comes back from Redis: the store is connected again after the test before restarted
  // Redis (a 200 alone may be a MISS of a store that is still reconnecting and fails at once).
  await eventually(async () => ((await httpRequest(a.port, '/cached/warm', { headers: { host: 'gw.test' } })).headers['x-cache'] === 'HIT' ? true : undefined), 15_000, 100, 'a HIT through Redis');
  await pauser.sendCommand(['CLIENT', 'PAUSE', '3000', 'ALL']);
  const res = await timed(a, '/cached/hung-1');
  t.equal(res.status, 200, 'answered by the upstream');
  t.ok(res.ms >= 300 && res.ms < 1900, `after the SLA and without waiting for Redis (${res.ms.toFixed(0)} ms; slaMs 300, command timeout 2000, pause 3000)`);
  const metrics = await eventually(async () => {
    const body = JSON.parse((await httpRequest(a.port, '/metrics')).body);
    const cache = body.middleware?.cache ?? {};
    return (cache.slaMisses ?? 0) > 0 ? cache : undefined;
  }, 5000);
  t.ok(metrics.slaMisses >= 1, `the miss counted: middleware.cache.slaMisses ${metrics.slaMisses}`);
});
