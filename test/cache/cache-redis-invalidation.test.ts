// Invalidation on a `redis` store (docs/cache.md#invalidation), against a real redis-server: two
// instances (data planes, each with a RedisStore of its own) share the cache; a POST on one drops the
// URL's every variant and the URL its answer's Location names, and the other instance then misses.
// The URL's group of keys goes with them, and a URL nobody invalidated keeps its entries. An answer
// one instance is still fetching when another invalidates its URL is not stored, also when Redis
// evicts the invalidations' generations meanwhile. An entry whose group Redis evicted is not served,
// so the invalidation that finds no group leaves nothing to serve.
import { createClient } from 'redis';
import t from 'tap';
import { RemoteCacheStore } from '../../src/cache/remote-store.js';
import { Counters } from '../../src/metrics/counters.js';
import { buildPipeline } from '../../src/middleware/registry.js';
import type { DataPlane } from '../../src/proxy/data-plane.js';
import { RedisStore } from '../../src/stores/redis-store.js';
import { planeInFrontOf } from '../helpers/data-plane.js';
import { rawRequest } from '../helpers/raw-http.js';
import { startRedisServer } from '../helpers/redis-server.js';
import { storeLookup } from '../helpers/stores.js';
import { entry, startUpstream } from '../helpers/upstream-server.js';

const redis = await startRedisServer();
t.teardown(() => redis.stop());

let version = 0;
/** Set: the next GET's answer waits until it is called with a function that releases it. */
let holdNext: ((release: () => void) => void) | null = null;
const upstream = await startUpstream((req, res) => {
  if (req.method === 'POST') {
    res.writeHead(201, { location: '/items/listed', 'content-length': '0' });
    res.end();
    return;
  }
  const body = `${req.url} ${req.headers['accept-language'] ?? '-'} v${++version}`;
  const answer = (): void => {
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body), 'cache-control': 'max-age=600', vary: 'Accept-Language' });
    res.end(body);
  };
  const held = holdNext;
  holdNext = null;
  if (held === null) answer();
  else held(answer);
});
t.teardown(() => upstream.close());

async function instance(): Promise<DataPlane> {
  const plane = await planeInFrontOf(t, upstream.url, [entry('GET', '/items/{id}', upstream.url), entry('POST', '/items/{id}', upstream.url)]);
  const store = new RedisStore({ name: 'shared', url: redis.url, keyPrefix: 'gw:', connectTimeoutMs: 2000, commandTimeoutMs: 1000, connectAttempts: 3, breakerFailures: 5, breakerResetMs: 1000 });
  t.teardown(() => store.close());
  const cache = new RemoteCacheStore(store, 'cache', () => Promise.resolve());
  const pipeline = buildPipeline(
    [{ id: 'cache', type: 'responseCache', slaMs: 1000, store: 'shared', maxEntryBytes: 131072, maxBytes: 1 << 24, defaultTtlMs: 0, staleIfErrorMs: 0 }],
    { metrics: new Counters(), warn: () => {}, stores: storeLookup({ cache: (name) => (name === 'shared' ? cache : undefined) }) },
  );
  t.teardown(() => pipeline.close());
  plane.setPipeline(pipeline);
  return plane;
}
const [a, b] = [await instance(), await instance()];

const inspect = createClient({ url: redis.url });
inspect.on('error', () => {});
await inspect.connect();
t.teardown(() => inspect.destroy());

async function ask(plane: DataPlane, method: string, path: string, language?: string): Promise<{ status: number; xCache: string | undefined; body: string }> {
  const extra = (language === undefined ? '' : `Accept-Language: ${language}\r\n`) + (method === 'POST' ? 'Content-Length: 0\r\n' : '');
  const [answer] = (await rawRequest(plane.port, `${method} ${path} HTTP/1.1\r\nHost: gw\r\n${extra}\r\n`, { responses: 1, waitMs: 10_000 })).responses;
  if (answer === undefined || !answer.complete) throw new Error(`${method} ${path}: no complete answer`);
  return { status: answer.status, xCache: answer.headers['x-cache']?.[0], body: answer.body.toString() };
}

t.test("a POST on one instance drops the URL's every variant and its Location's entry for the other", async (t) => {
  const asked: Array<[string, string | undefined]> = [
    ['/items/7', 'en'],
    ['/items/7', 'de'],
    ['/items/listed', undefined],
    ['/items/8', 'en'],
  ];
  for (const [path, language] of asked) t.equal((await ask(a, 'GET', path, language)).xCache, 'MISS', `${path} ${language ?? ''}: stored by A`);
  const before = new Map<string, string>();
  for (const [path, language] of asked) {
    const hit = await ask(b, 'GET', path, language);
    t.equal(hit.xCache, 'HIT', `${path} ${language ?? ''}: a HIT on B`);
    before.set(`${path} ${language}`, hit.body);
  }
  const groups = async () => (await inspect.keys('gw:kvg:*')).length;
  t.equal(await groups(), 3, "one group per URL: /items/7's two variants in one");
  for (const key of await inspect.keys('gw:kvg:*')) {
    const ttl = await inspect.pTTL(key);
    t.ok(ttl > 0 && ttl <= 600_000, `${key} expires with its entries (${ttl} ms)`);
  }

  const post = await ask(a, 'POST', '/items/7');
  t.equal(post.status, 201);
  for (const [path, language] of asked.slice(0, 3)) {
    const after = await ask(b, 'GET', path, language);
    t.equal(after.xCache, 'MISS', `${path} ${language ?? ''}: dropped for B too`);
    t.not(after.body, before.get(`${path} ${language}`), 'fetched anew');
  }
  t.same(await ask(b, 'GET', '/items/8', 'en'), { status: 200, xCache: 'HIT', body: before.get('/items/8 en') }, 'another URL keeps its entry');
  t.equal(await groups(), 3, 'the dropped groups are gone, and filled again by the refetches');
});

t.test('an answer fetched on one instance while another invalidates its URL is not stored', async (t) => {
  let release: (() => void) | null = null;
  const arrived = new Promise<void>((resolve) => {
    holdNext = (answer) => {
      release = answer;
      resolve();
    };
  });
  const inFlight = ask(a, 'GET', '/items/9', 'en');
  await arrived;
  t.equal((await ask(b, 'POST', '/items/9')).status, 201, 'the POST on B succeeds while A waits for the upstream');
  release!();
  const first = await inFlight;
  t.equal(first.xCache, 'MISS', 'A serves the answer it fetched');
  const after = await ask(b, 'GET', '/items/9', 'en');
  t.equal(after.xCache, 'MISS', 'the answer that predates the POST was not stored');
  t.not(after.body, first.body, 'fetched anew');
  t.same(await ask(a, 'GET', '/items/9', 'en'), { status: 200, xCache: 'HIT', body: after.body }, 'the answer fetched after the POST is stored');
});

t.test("an entry whose group Redis evicted is not served: the POST that finds no group to drop leaves nothing behind", async (t) => {
  const variants = ['en', 'de'];
  const before = new Map<string, string>();
  for (const language of variants) {
    t.equal((await ask(a, 'GET', '/items/20', language)).xCache, 'MISS', `${language}: stored by A`);
    const hit = await ask(b, 'GET', '/items/20', language);
    t.equal(hit.xCache, 'HIT', `${language}: a HIT on B`);
    before.set(language, hit.body);
  }
  const groups = await inspect.keys('gw:kvg:*/items/20 ');
  t.equal(groups.length, 1, 'the URL has its group');
  const members = await inspect.sMembers(groups[0]!);
  t.equal(members.length, 3, 'filed in it: the Vary index and both variants');
  // What maxmemory with allkeys-lru did in the repro (the entries are read by every hit, their group
  // by nothing, so LRU picked the group): Redis evicts a key by deleting it as DEL does (evict.c,
  // dbGenericDelete), nothing of it stays. Which key eviction picks is sampling; the state it leaves is this.
  await inspect.del(groups[0]!);
  t.equal(await inspect.exists(members), 3, 'the entries stay in Redis without their group');

  t.equal((await ask(a, 'POST', '/items/20')).status, 201);
  for (const language of variants) {
    const after = await ask(b, 'GET', '/items/20', language);
    t.equal(after.xCache, 'MISS', `${language}: not served after the POST`);
    t.not(after.body, before.get(language), `${language}: fetched anew`);
  }
});

t.test('an entry whose group Redis evicted is a miss, and the answer fetched again is filed for the next invalidation', async (t) => {
  const first = await ask(a, 'GET', '/items/21', 'en');
  t.equal(first.xCache, 'MISS', 'stored by A');
  const [group] = await inspect.keys('gw:kvg:*/items/21 ');
  await inspect.del(group!);
  const again = await ask(b, 'GET', '/items/21', 'en');
  t.equal(again.xCache, 'MISS', 'not served once its group is gone');
  t.not(again.body, first.body, 'fetched anew');
  t.same(await ask(a, 'GET', '/items/21', 'en'), { status: 200, xCache: 'HIT', body: again.body }, 'the answer fetched again is served');
  t.equal((await inspect.sMembers(group!)).length, 2, 'filed again (the Vary index and the variant)');
  t.equal((await ask(b, 'POST', '/items/21')).status, 201);
  t.equal((await ask(a, 'GET', '/items/21', 'en')).xCache, 'MISS', 'the POST dropped it');
});

t.test('an answer fetched while its URL was invalidated is not stored when Redis evicted the generations and made them again meanwhile', async (t) => {
  let release: (() => void) | null = null;
  const arrived = new Promise<void>((resolve) => {
    holdNext = (answer) => {
      release = answer;
      resolve();
    };
  });
  const inFlight = ask(a, 'GET', '/items/22', 'en');
  await arrived;
  t.equal((await ask(b, 'POST', '/items/22')).status, 201, 'the POST on B succeeds while A waits for the upstream');
  // Evicted as in the tests above (the hash is read by every lookup, so LRU rarely picks it; a random
  // policy may), then made again by a lookup of another URL.
  t.equal(await inspect.del('gw:kvgen'), 1, 'the generations are gone');
  t.equal((await ask(b, 'GET', '/items/23', 'en')).xCache, 'MISS');
  release!();
  const first = await inFlight;
  t.equal(first.xCache, 'MISS', 'A serves the answer it fetched');
  const after = await ask(b, 'GET', '/items/22', 'en');
  t.equal(after.xCache, 'MISS', 'the answer that predates the POST was not stored');
  t.not(after.body, first.body, 'fetched anew');
  t.same(await ask(a, 'GET', '/items/22', 'en'), { status: 200, xCache: 'HIT', body: after.body }, 'the answer fetched after it is stored');
});
