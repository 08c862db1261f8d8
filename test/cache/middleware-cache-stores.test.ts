// responseCache with a store other than `local` (docs/reference/response-cache.md#stores), through the middleware store lookup
// of the middleware context: a store that keeps bytes and answers asynchronously, shared by two data
// planes (two instances), stands in for Redis: each serves the other's entries, variants and stale
// entries included, and coalescing still holds. A store that fails costs no request its answer; one
// slower than slaMs leaves the request labelled.
import { storeLookup } from '../helpers/stores.js';
import type http from 'node:http';
import t from 'tap';
import { createHash } from 'node:crypto';
import { decodeRecord, encodeRecord } from '../../src/cache/codec.js';
import type { CacheRecord } from '../../src/cache/record.js';
import type { CacheStore } from '../../src/cache/store.js';
import { Counters } from '../../src/metrics/counters.js';
import { buildPipeline, type MiddlewareConfig } from '../../src/middleware/registry.js';
import type { DataPlane } from '../../src/proxy/data-plane.js';
import { eventually } from '../helpers/gateway-process.js';
import { rawRequest } from '../helpers/raw-http.js';
import { entry, startUpstream, type UpstreamHandler } from '../helpers/upstream-server.js';
import { planeInFrontOf } from '../helpers/data-plane.js';

/** Keeps records as bytes with a TTL, answering a few ms later, like a store across the network. */
class BytesStore implements CacheStore {
  readonly values = new Map<string, { bytes: Buffer; expires: number }>();
  latencyMs = 2;
  failing = false;
  sets = 0;

  private later<T>(value: () => T): Promise<T> {
    return new Promise((resolve, reject) =>
      setTimeout(() => {
        if (this.failing) reject(new Error('store down'));
        else resolve(value());
      }, this.latencyMs),
    );
  }

  get(key: string): Promise<CacheRecord | undefined> {
    return this.later(() => {
      const found = this.values.get(key);
      if (found === undefined || found.expires <= Date.now()) return undefined;
      return decodeRecord(found.bytes);
    });
  }

  set(key: string, record: CacheRecord, ttlMs: number): Promise<void> {
    const bytes = encodeRecord(record);
    return this.later(() => {
      this.sets++;
      this.values.set(key, { bytes, expires: Date.now() + ttlMs });
    });
  }

  delete(key: string): Promise<void> {
    return this.later(() => {
      this.values.delete(key);
    });
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

const upstream = await startUpstream();
t.teardown(() => upstream.close());

function instance(): Promise<DataPlane> {
  return planeInFrontOf(t, upstream.url, [entry('GET', '/items/{id}', upstream.url)]);
}
const planeA = await instance();
const planeB = await instance();

const counters = new Counters();
function use(store: CacheStore, overrides: Partial<MiddlewareConfig> = {}): void {
  const config = {
    id: 'cache',
    type: 'responseCache',
    slaMs: 1000,
    store: 'shared',
    maxEntryBytes: 131072,
    maxBytes: 67108864,
    defaultTtlMs: 0,
    staleIfErrorMs: 60000,
    ...overrides,
  } as MiddlewareConfig;
  const cacheStores = (name: string) => (name === 'shared' ? store : undefined);
  // Each instance builds its own pipeline, as each worker of each instance does.
  planeA.setPipeline(buildPipeline([config], { metrics: counters, warn: () => {}, stores: storeLookup({ cache: cacheStores }) }));
  planeB.setPipeline(buildPipeline([config], { metrics: counters, warn: () => {}, stores: storeLookup({ cache: cacheStores }) }));
}

function answering(headers: http.OutgoingHttpHeaders, body: string | ((req: http.IncomingMessage) => string), status = 200, delayMs = 0): UpstreamHandler {
  return (req, res) => {
    const text = typeof body === 'string' ? body : body(req);
    setTimeout(() => {
      res.writeHead(status, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(text), ...headers });
      res.end(text);
    }, delayMs);
  };
}

async function get(plane: DataPlane, path: string, headers = '') {
  const res = await rawRequest(plane.port, `GET ${path} HTTP/1.1\r\nHost: gw\r\n${headers}\r\n`, { responses: 1, waitMs: 5000 });
  const response = res.responses[0];
  return { status: response?.status, xCache: response?.headers['x-cache']?.join(','), age: response?.headers.age?.[0], body: response?.body.toString() ?? '' };
}

const seen = (path: string) => upstream.requests.filter((r) => r.url === path).length;
const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

t.test('two instances sharing a store serve each other\'s entries (status, headers, body, Age)', async (t) => {
  use(new BytesStore());
  upstream.setHandler(answering({ 'cache-control': 'max-age=60', age: '5', etag: '"e1"' }, 'shared body', 203));
  const a = await get(planeA, '/items/shared');
  t.same([a.status, a.xCache, a.body], [203, 'MISS', 'shared body']);
  const b = await get(planeB, '/items/shared');
  t.same([b.status, b.xCache, b.body, b.age], [203, 'HIT', 'shared body', '5'], 'instance B serves what A stored');
  t.equal(seen('/items/shared'), 1);
});

t.test('Vary across instances: each variant where it was stored', async (t) => {
  use(new BytesStore());
  upstream.setHandler(answering({ 'cache-control': 'max-age=60', vary: 'accept-language, authorization' }, (req) => `${req.headers['accept-language']}`));
  t.equal((await get(planeA, '/items/v', 'Accept-Language: en\r\n')).xCache, 'MISS');
  t.equal((await get(planeB, '/items/v', 'Accept-Language: fr\r\n')).xCache, 'MISS');
  const en = await get(planeB, '/items/v', 'Accept-Language: en\r\n');
  const fr = await get(planeA, '/items/v', 'Accept-Language: fr\r\n');
  t.same([en.xCache, en.body, fr.xCache, fr.body], ['HIT', 'en', 'HIT', 'fr']);
});

t.test('credentials never reach the store, neither in keys nor in records', async (t) => {
  const store = new BytesStore();
  use(store);
  upstream.setHandler(answering({ 'cache-control': 'public, max-age=60', vary: 'Authorization' }, 'per user'));
  await get(planeA, '/items/secret', 'Authorization: Bearer very-secret-token\r\n');
  const hit = await get(planeB, '/items/secret', 'Authorization: Bearer very-secret-token\r\n');
  t.equal(hit.xCache, 'HIT');
  t.equal((await get(planeB, '/items/secret', 'Authorization: Bearer other\r\n')).xCache, 'MISS', 'another token is another variant');
  for (const [key, { bytes }] of store.values) {
    t.notOk(key.includes('very-secret-token'), `key ${JSON.stringify(key)}`);
    t.notOk(bytes.includes('very-secret-token'), 'record bytes');
  }
});

t.test("apiKeyAuth's keys left to the upstream (hideCredentials false) reach the store as digests only, in the query and in a variant", async (t) => {
  const store = new BytesStore();
  const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
  const auth = {
    id: 'auth',
    type: 'apiKeyAuth',
    slaMs: 100,
    header: 'X-Api-Key',
    query: 'api_key',
    keys: [
      { consumer: 'alice', sha256: sha256('alice-key-in-plain') },
      { consumer: 'bob', sha256: sha256('bob-key-in-plain') },
    ],
    hideCredentials: false,
  } as MiddlewareConfig;
  const cache = { id: 'cache', type: 'responseCache', slaMs: 1000, store: 'shared', maxEntryBytes: 131072, maxBytes: 67108864, defaultTtlMs: 0, staleIfErrorMs: 60000 } as MiddlewareConfig;
  const cacheStores = (name: string) => (name === 'shared' ? store : undefined);
  for (const plane of [planeA, planeB]) plane.setPipeline(buildPipeline([auth, cache], { metrics: counters, warn: () => {}, stores: storeLookup({ cache: cacheStores }) }));
  upstream.setHandler(answering({ 'cache-control': 'public, max-age=60', vary: 'X-Api-Key' }, (req) => {
    // Who the answer is for, without the key itself (the store keeps bodies as they are).
    const key = req.headers['x-api-key'];
    return key === undefined ? 'for a query key' : `for ${String(key).split('-')[0]}`;
  }));
  t.equal((await get(planeA, '/items/q?api_key=alice-key-in-plain')).xCache, 'MISS');
  t.same(await get(planeB, '/items/q?api_key=alice-key-in-plain').then((r) => [r.xCache, r.body]), ['HIT', 'for a query key'], 'the same key: a hit');
  t.equal((await get(planeB, '/items/q?api_key=bob-key-in-plain')).xCache, 'MISS', 'another key in the query: another entry');
  t.equal((await get(planeA, '/items/h', 'X-Api-Key: bob-key-in-plain\r\n')).xCache, 'MISS');
  t.same(await get(planeB, '/items/h', 'X-Api-Key: bob-key-in-plain\r\n').then((r) => [r.xCache, r.body]), ['HIT', 'for bob'], 'the same key header: a hit');
  t.equal((await get(planeB, '/items/h', 'X-Api-Key: alice-key-in-plain\r\n')).xCache, 'MISS', 'another key header: another variant');
  t.ok(store.values.size >= 5, `${store.values.size} keys stored`);
  for (const [key, { bytes }] of store.values) {
    t.notOk(/alice-key|bob-key/.test(key), `key ${JSON.stringify(key)} holds no API key`);
    t.notOk(/alice-key|bob-key/.test(bytes.toString('latin1')), 'nor does its record');
  }
});

t.test('stale entries from the shared store stand in when the upstream fails', async (t) => {
  use(new BytesStore());
  upstream.setHandler(answering({ 'cache-control': 'max-age=1' }, 'old'));
  await get(planeA, '/items/stale');
  await delay(1100);
  upstream.setHandler(answering({}, 'down', 503));
  const stale = await get(planeB, '/items/stale');
  t.same([stale.status, stale.xCache, stale.body], [200, 'STALE', 'old']);
});

t.test('coalescing with an asynchronous store: 20 concurrent misses, one upstream request', async (t) => {
  const store = new BytesStore();
  store.latencyMs = 5;
  use(store);
  upstream.setHandler(answering({ 'cache-control': 'max-age=60' }, 'once', 200, 100));
  const results = await Promise.all(Array.from({ length: 20 }, () => get(planeA, '/items/herd')));
  t.equal(seen('/items/herd'), 1);
  t.ok(results.every((r) => r.status === 200 && r.body === 'once'));
  t.equal(results.filter((r) => r.xCache === 'MISS').length, 1);
});

t.test('a failing store: every request still answered (MISS), the failures counted', async (t) => {
  const store = new BytesStore();
  store.failing = true;
  use(store);
  counters.take();
  upstream.setHandler(answering({ 'cache-control': 'max-age=60' }, 'direct'));
  for (let i = 0; i < 3; i++) {
    const res = await get(planeA, '/items/no-store');
    t.same([res.status, res.xCache, res.body], [200, 'MISS', 'direct']);
  }
  t.equal(seen('/items/no-store'), 3);
  // The last write fails after the answer went out: counted as it comes, for up to 3 s.
  const taken: Record<string, number> = {};
  await eventually(
    async () => {
      for (const [name, n] of Object.entries(counters.take() ?? {})) taken[name] = (taken[name] ?? 0) + n;
      return (taken['middleware.cache.storeErrors'] ?? 0) >= 6 ? true : undefined;
    },
    3000,
    10,
    'six store errors',
  );
  t.equal(taken['middleware.cache.storeErrors'], 6, 'three reads and three writes failed');
  t.equal(taken['middleware.cache.misses'], 3);
});

t.test('a store slower than slaMs: the pipeline moves on, the answer is still labelled and stored', async (t) => {
  const store = new BytesStore();
  store.latencyMs = 150;
  use(store, { slaMs: 50 } as Partial<MiddlewareConfig>);
  counters.take();
  upstream.setHandler(answering({ 'cache-control': 'max-age=60' }, 'slow store'));
  const res = await get(planeA, '/items/slow-store');
  t.same([res.status, res.xCache, res.body], [200, 'MISS', 'slow store']);
  // The write takes the store's 150 ms after the answer: polled.
  await eventually(async () => (store.sets > 0 ? true : undefined), 3000, 10, 'the entry stored');
  t.equal(store.sets, 1, 'stored all the same');
  const taken = counters.take() ?? {};
  t.equal(taken['middleware.cache.slaMisses'], 1, 'the pipeline counted the SLA miss');
  t.equal(taken['middleware.cache.hits'] ?? 0, 0, 'no hit counted for a request that was forwarded');
  t.equal(taken['middleware.cache.misses'], 1);
});
