// With a `redis` store, an unsafe request's answer leaves once Redis has run its invalidation
// (docs/cache.md#invalidation): a request sent after that answer arrived is not served what it
// changed, on another instance either. A Redis that does not answer holds the answer at most the
// store's command timeout, and it still goes. Instance A reaches Redis through a relay that can hold
// its commands back; instance B directly.
import t, { type Test } from 'tap';
import { RemoteCacheStore } from '../../src/cache/remote-store.js';
import { Counters } from '../../src/metrics/counters.js';
import { buildPipeline } from '../../src/middleware/registry.js';
import type { DataPlane } from '../../src/proxy/data-plane.js';
import { RedisStore } from '../../src/stores/redis-store.js';
import { planeInFrontOf } from '../helpers/data-plane.js';
import { rawRequest } from '../helpers/raw-http.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { storeLookup } from '../helpers/stores.js';
import { startTcpRelay } from '../helpers/tcp-relay.js';
import { entry, startUpstream } from '../helpers/upstream-server.js';

const redis = await startRedisServer();
t.teardown(() => redis.stop());
const relay = await startTcpRelay({ host: '127.0.0.1', port: redis.port });
t.teardown(() => relay.close());

/** The answer to PUT /items/3: more than one read of the upstream's socket, waiting while the head does. */
const UPDATED = Buffer.alloc(512 * 1024, 'u');
let version = 0;
const upstream = await startUpstream((req, res) => {
  if (req.method === 'PUT') {
    if (req.url === '/items/3') {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': UPDATED.length });
      res.end(UPDATED);
    } else {
      res.writeHead(204);
      res.end();
    }
    return;
  }
  const body = `${req.url} v${++version}`;
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body), 'cache-control': 'max-age=600' });
  res.end(body);
});
t.teardown(() => upstream.close());

/** A's command timeout: how long a silent Redis may hold its answers. */
const COMMAND_TIMEOUT_MS = 1000;

async function instance(redisUrl: string): Promise<{ plane: DataPlane; counters: Counters }> {
  const plane = await planeInFrontOf(t, upstream.url, [entry('GET', '/items/{id}', upstream.url), entry('PUT', '/items/{id}', upstream.url)]);
  const store = new RedisStore({ name: 'shared', url: redisUrl, keyPrefix: 'gw:', connectTimeoutMs: 2000, commandTimeoutMs: COMMAND_TIMEOUT_MS, connectAttempts: 3, breakerFailures: 5, breakerResetMs: 1000 });
  t.teardown(() => store.close());
  await store.settled();
  const cache = new RemoteCacheStore(store, 'cache', () => Promise.resolve());
  const counters = new Counters();
  const pipeline = buildPipeline(
    [{ id: 'cache', type: 'responseCache', slaMs: COMMAND_TIMEOUT_MS, store: 'shared', maxEntryBytes: 131072, maxBytes: 1 << 24, defaultTtlMs: 0, staleIfErrorMs: 0 }],
    { metrics: counters, warn: () => {}, stores: storeLookup({ cache: (name) => (name === 'shared' ? cache : undefined) }) },
  );
  t.teardown(() => pipeline.close());
  plane.setPipeline(pipeline);
  return { plane, counters };
}
const a = await instance(`redis://127.0.0.1:${relay.port}`);
const b = await instance(redis.url);

async function ask(plane: DataPlane, method: string, path: string): Promise<{ status: number; xCache: string | undefined; body: string; ms: number }> {
  const started = performance.now();
  const extra = method === 'PUT' ? 'Content-Length: 0\r\n' : '';
  const [answer] = (await rawRequest(plane.port, `${method} ${path} HTTP/1.1\r\nHost: gw\r\n${extra}\r\n`, { responses: 1, waitMs: 10_000 })).responses;
  if (answer === undefined || !answer.complete) throw new Error(`${method} ${path}: no complete answer`);
  return { status: answer.status, xCache: answer.headers['x-cache']?.[0], body: answer.body.toString(), ms: performance.now() - started };
}

async function storedAndHit(t: Test, path: string): Promise<string> {
  t.equal((await ask(a.plane, 'GET', path)).xCache, 'MISS', `${path}: stored by A`);
  const hit = await ask(b.plane, 'GET', path);
  t.equal(hit.xCache, 'HIT', `${path}: a HIT on B`);
  return hit.body;
}

t.test("a PUT's answer waits until Redis has dropped the entry: a GET sent after it is not served the old one", async (t) => {
  const before = await storedAndHit(t, '/items/1');
  relay.hold();
  // Redis slow for A by this much: its answer must wait that long, not the GET's HIT.
  const slowMs = 500;
  const released = setTimeout(() => relay.release(), slowMs);
  t.teardown(() => clearTimeout(released));
  const put = await ask(a.plane, 'PUT', '/items/1');
  t.equal(put.status, 204);
  const after = await ask(b.plane, 'GET', '/items/1');
  t.equal(after.xCache, 'MISS', 'B misses: the entry was gone before the answer to the PUT left');
  t.not(after.body, before, 'fetched anew');
  // Lower bound only: a loaded host may take longer.
  t.ok(put.ms >= slowMs - 50, `the answer waited for Redis (${put.ms.toFixed(0)} ms)`);
});

t.test('a Redis that does not answer holds the answer at most the command timeout, and the answer goes', async (t) => {
  await storedAndHit(t, '/items/2');
  a.counters.take();
  relay.hold();
  t.teardown(() => relay.release());
  const put = await ask(a.plane, 'PUT', '/items/2');
  t.equal(put.status, 204, 'answered, the invalidation failed');
  // The command timeout is measured by a timer: room for a host three times slower above it.
  t.ok(put.ms >= COMMAND_TIMEOUT_MS - 50 && put.ms < COMMAND_TIMEOUT_MS * 3, `after the command timeout of ${COMMAND_TIMEOUT_MS} ms (${put.ms.toFixed(0)} ms)`);
  t.equal(a.counters.take()?.['middleware.cache.storeErrors'], 1, 'counted as a store error');
});

t.test('an answer with a body waits with its head, and reaches the client whole', async (t) => {
  await storedAndHit(t, '/items/3');
  relay.hold();
  const slowMs = 300;
  const released = setTimeout(() => relay.release(), slowMs);
  t.teardown(() => clearTimeout(released));
  const put = await ask(a.plane, 'PUT', '/items/3');
  t.equal(put.status, 200);
  t.ok(put.body === UPDATED.toString(), `the body whole (${put.body.length} of ${UPDATED.length} bytes)`);
  t.ok(put.ms >= slowMs - 50, `after Redis dropped the entry (${put.ms.toFixed(0)} ms)`);
  t.equal((await ask(b.plane, 'GET', '/items/3')).xCache, 'MISS');
});
