// When the responseCache's store fails, or the cache itself does, through a data plane and a real
// upstream that sends an X-Cache of its own: every request is still answered, with the cache's X-Cache
// only (MISS when the store failed, BYPASS when the cache did), the failures are counted and each kind
// gives a warn line naming the reason, at most one every 10 s.
import t from 'tap';
import type { CacheRecord } from '../../src/cache/record.js';
import type { CacheStore } from '../../src/cache/store.js';
import { Counters } from '../../src/metrics/counters.js';
import { buildPipeline, type MiddlewareConfig } from '../../src/middleware/registry.js';
import { planeInFrontOf } from '../helpers/data-plane.js';
import { rawRequest } from '../helpers/raw-http.js';
import { storeLookup } from '../helpers/stores.js';
import { entry, startUpstream } from '../helpers/upstream-server.js';

const upstream = await startUpstream((req, res) => {
  res.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'max-age=60', 'x-cache': 'HIT from upstream' });
  res.end('from the upstream');
});
t.teardown(() => upstream.close());
const plane = await planeInFrontOf(t, upstream.url, [entry('GET', '/items/{id}', upstream.url)]);

/** A record nobody can read: any property read throws (a bug's stand-in). A Promise may resolve to it. */
function unreadable(): CacheRecord {
  return new Proxy({} as CacheRecord, {
    get(_target, name) {
      if (name === 'then') return undefined;
      throw new Error('record unreadable');
    },
  });
}

class FailingStore implements CacheStore {
  constructor(private readonly get_: () => CacheRecord | undefined | Promise<CacheRecord | undefined>) {}
  get(): CacheRecord | undefined | Promise<CacheRecord | undefined> {
    return this.get_();
  }
  set(): void {
    throw new Error('disk on fire');
  }
  delete(): void {}
  ready(): Promise<void> {
    return Promise.resolve();
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

const counters = new Counters();
let warnings: Array<{ message: string; fields?: Record<string, unknown> }> = [];
function use(store: CacheStore): void {
  const config = { id: 'cache', type: 'responseCache', slaMs: 1000, store: 'broken', maxEntryBytes: 131072, maxBytes: 67108864, defaultTtlMs: 0, staleIfErrorMs: 60000 } as MiddlewareConfig;
  warnings = [];
  counters.take();
  plane.setPipeline(
    buildPipeline([config], {
      metrics: counters,
      warn: (message, fields) => warnings.push({ message, fields }),
      stores: storeLookup({ cache: (name) => (name === 'broken' ? store : undefined) }),
    }),
  );
}

async function get(path: string) {
  const res = await rawRequest(plane.port, `GET ${path} HTTP/1.1\r\nHost: gw\r\n\r\n`, { responses: 1, waitMs: 5000 });
  const response = res.responses[0];
  return { status: response?.status, xCache: response?.headers['x-cache'], body: response?.body.toString() };
}

t.test('a store that throws: MISS, counted, one warn line with the reason', async (t) => {
  use(
    new FailingStore(() => {
      throw new Error('disk on fire');
    }),
  );
  for (let i = 0; i < 5; i++) t.same(await get('/items/a'), { status: 200, xCache: ['MISS'], body: 'from the upstream' });
  const taken = counters.take() ?? {};
  t.equal(taken['middleware.cache.storeErrors'], 10, 'five reads and five writes failed');
  t.equal(warnings.length, 1, 'one line for ten failures within 10 s');
  t.match(warnings[0]?.message, /responseCache "cache": its store failed.*: disk on fire/);
  t.match(warnings[0]?.fields, { middleware: 'cache', reason: 'disk on fire' });
});

t.test('the cache failing as it decides: BYPASS, the upstream\'s X-Cache withheld, counted, one warn line', async (t) => {
  use(new FailingStore(() => unreadable()));
  for (let i = 0; i < 3; i++) t.same(await get('/items/b'), { status: 200, xCache: ['BYPASS'], body: 'from the upstream' });
  const taken = counters.take() ?? {};
  t.equal(taken['middleware.cache.errors'], 3);
  t.equal(taken['middleware.cache.bypass'], 3);
  t.equal(taken['middleware.cache.misses'] ?? 0, 0);
  t.equal(warnings.length, 1);
  t.match(warnings[0]?.message, /responseCache "cache" failed; the request went upstream without it \(X-Cache: BYPASS\): record unreadable/);
});

t.test('the cache failing after an asynchronous lookup: the same', async (t) => {
  use(new FailingStore(() => Promise.resolve(unreadable())));
  for (let i = 0; i < 3; i++) t.same(await get('/items/c'), { status: 200, xCache: ['BYPASS'], body: 'from the upstream' });
  const taken = counters.take() ?? {};
  t.equal(taken['middleware.cache.errors'], 3);
  t.equal(taken['middleware.cache.bypass'], 3);
  t.equal(warnings.length, 1);
  t.match(warnings[0]?.message, /record unreadable/);
});
