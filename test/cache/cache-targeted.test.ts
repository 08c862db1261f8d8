// Targeted cache control (RFC 9213) through a real data plane, a real upstream and raw client sockets:
// the fields the response cache obeys (CDN-Cache-Control by default, and a configured name of its
// own) never reach the client, on every path an answer takes: MISS, HIT, BYPASS (unsafe method,
// request no-store, an answer the rules refuse), STALE, REVALIDATED, UPDATING, a 304 to a client's
// conditional request, from the cache or passed through. Fields it does not obey pass untouched.
import type http from 'node:http';
import t, { type Test } from 'tap';
import { Counters } from '../../src/metrics/counters.js';
import type { Pipeline } from '../../src/middleware/pipeline.js';
import { buildPipeline } from '../../src/middleware/registry.js';
import type { ResponseCacheConfig } from '../../src/middleware/response-cache.js';
import { eventually } from '../helpers/gateway-process.js';
import { rawRequest } from '../helpers/raw-http.js';
import { entry, startUpstream, type UpstreamHandler } from '../helpers/upstream-server.js';
import { planeInFrontOf } from '../helpers/data-plane.js';

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const plane = await planeInFrontOf(t, upstream.url, [entry('GET', '/items/{id}', upstream.url), entry('POST', '/items/{id}', upstream.url)]);

let current: Pipeline | null = null;
function use(overrides: Partial<ResponseCacheConfig> = {}): void {
  void current?.close();
  current = buildPipeline(
    [{ id: 'cache', type: 'responseCache', slaMs: 1000, store: 'local', maxEntryBytes: 131072, maxBytes: 67108864, defaultTtlMs: 0, staleIfErrorMs: 60000, ...overrides }],
    { metrics: new Counters(), warn: () => {} },
  );
  plane.setPipeline(current);
}

function answering(headers: http.OutgoingHttpHeaders, status = 200, body = 'body'): UpstreamHandler {
  return (_req, res) => {
    res.writeHead(status, status === 304 ? headers : { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body), ...headers });
    res.end(status === 304 ? undefined : body);
  };
}

async function ask(path: string, headers = '', method = 'GET') {
  const body = method === 'POST' ? 'Content-Length: 2\r\n\r\n{}' : '\r\n';
  const res = await rawRequest(plane.port, `${method} ${path} HTTP/1.1\r\nHost: gw\r\n${headers}${body}`, { responses: 1, waitMs: 5000 });
  const response = res.responses[0]!;
  return { status: response.status, xCache: response.headers['x-cache']?.join(','), headers: response.headers, body: response.body.toString() };
}

const TARGETED = ['cdn-cache-control', 'gateway-cache-control'];
type Answer = Awaited<ReturnType<typeof ask>>;
function withheld(t: Test, answer: Answer, what: string): void {
  for (const name of TARGETED) t.equal(answer.headers[name], undefined, `${what}: no ${name}`);
  t.ok(answer.headers['cache-control'] !== undefined || answer.status === 304, `${what}: Cache-Control is still served`);
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

t.test('MISS and HIT, with the field in any letter case', async (t) => {
  use();
  upstream.setHandler(answering({ 'cache-control': 'no-store', 'CDN-cache-CONTROL': 'max-age=60' }));
  const miss = await ask('/items/a');
  // The upstream's answer, not a timeout's 504 (also labelled MISS, and nothing stored).
  t.equal(miss.status, 200);
  t.equal(miss.xCache, 'MISS');
  withheld(t, miss, 'MISS');
  const hit = await ask('/items/a');
  t.equal(hit.xCache, 'HIT');
  withheld(t, hit, 'HIT');
});

t.test('BYPASS: an unsafe method, a request no-store, an answer the rules refuse', async (t) => {
  use();
  upstream.setHandler(answering({ 'cache-control': 'max-age=60', 'cdn-cache-control': 'max-age=60' }));
  const post = await ask('/items/b', '', 'POST');
  t.equal(post.xCache, 'BYPASS');
  withheld(t, post, 'POST');
  const noStore = await ask('/items/b', 'Cache-Control: no-store\r\n');
  t.equal(noStore.xCache, 'BYPASS');
  withheld(t, noStore, 'request no-store');
  upstream.setHandler(answering({ 'cache-control': 'max-age=60', 'cdn-cache-control': 'private' }));
  const refused = await ask('/items/c');
  t.equal(refused.xCache, 'BYPASS');
  withheld(t, refused, 'uncacheable');
  upstream.setHandler(answering({ 'cache-control': 'no-cache', 'cdn-cache-control': 'no-store' }, 500));
  const failed = await ask('/items/d');
  t.equal(failed.status, 500);
  withheld(t, failed, 'an upstream 500 with nothing stored');
});

t.test('STALE (stale-if-error)', async (t) => {
  use();
  upstream.setHandler(answering({ 'cache-control': 'max-age=60', 'cdn-cache-control': 'max-age=1' }));
  await ask('/items/e');
  await delay(1100);
  upstream.setHandler(answering({ 'cdn-cache-control': 'no-store' }, 503));
  const stale = await ask('/items/e');
  t.equal(stale.xCache, 'STALE');
  withheld(t, stale, 'STALE');
});

t.test('REVALIDATED, then HIT; the stored targeted field stays when the 304 has none (RFC 9111 4.3.4)', async (t) => {
  use();
  upstream.setHandler(answering({ 'cache-control': 'no-store', 'cdn-cache-control': 'max-age=1', etag: '"v1"' }));
  await ask('/items/f');
  await delay(1100);
  upstream.setHandler(answering({ 'cdn-cache-control': 'max-age=60', etag: '"v1"' }, 304));
  const revalidated = await ask('/items/f');
  t.equal(revalidated.xCache, 'REVALIDATED');
  t.equal(revalidated.body, 'body');
  withheld(t, revalidated, 'REVALIDATED');
  t.equal((await ask('/items/f')).xCache, 'HIT', 'fresh for the 304\'s CDN-Cache-Control');

  // max-age=2: the 304's Date has whole seconds, so the entry can be a second old again after it, and
  // it must still be fresh for the HIT at the end.
  upstream.setHandler(answering({ 'cache-control': 'no-store', 'cdn-cache-control': 'max-age=2', etag: '"v2"' }));
  await ask('/items/g');
  await delay(2100);
  upstream.setHandler(answering({ etag: '"v2"' }, 304));
  const kept = await ask('/items/g');
  t.equal(kept.xCache, 'REVALIDATED');
  withheld(t, kept, 'REVALIDATED by a 304 without the field');
  const again = await ask('/items/g');
  t.equal(again.xCache, 'HIT', 'the stored CDN-Cache-Control (max-age=2) still rules over Cache-Control: no-store: stored again');
});

t.test('UPDATING (stale-while-revalidate in the targeted field)', async (t) => {
  use();
  upstream.setHandler(answering({ 'cache-control': 'no-store', 'cdn-cache-control': 'max-age=1, stale-while-revalidate=30' }));
  await ask('/items/h');
  await delay(1100);
  const updating = await ask('/items/h');
  t.equal(updating.xCache, 'UPDATING');
  withheld(t, updating, 'UPDATING');
});

t.test('304 to a client\'s conditional request: from a fresh entry, and passed through from the upstream', async (t) => {
  use();
  upstream.setHandler(answering({ 'cache-control': 'max-age=60', 'cdn-cache-control': 'max-age=60', etag: '"x"' }));
  await ask('/items/i');
  // Stored once a plain GET hits: a fresh-clone CI run (three test files at a time) asked before the
  // entry was in, and got the upstream's 200.
  await eventually(async () => ((await ask('/items/i')).xCache === 'HIT' ? true : undefined), 3000, 20, 'the entry stored');
  const fromCache = await ask('/items/i', 'If-None-Match: "x"\r\n');
  t.equal(fromCache.status, 304);
  withheld(t, fromCache, '304 from the entry');
  upstream.setHandler(answering({ 'cache-control': 'max-age=60', 'cdn-cache-control': 'max-age=60', etag: '"y"' }, 304));
  const passed = await ask('/items/j', 'If-None-Match: "y"\r\n');
  t.equal(passed.status, 304);
  withheld(t, passed, '304 passed through');
});

t.test('a configured name of its own; fields it does not obey pass', async (t) => {
  use({ targetedCacheControl: ['Gateway-Cache-Control', 'CDN-Cache-Control'] });
  upstream.setHandler(answering({ 'cache-control': 'no-store', 'gateway-cache-control': 'max-age=60', 'cdn-cache-control': 'no-store', 'other-cache-control': 'max-age=5' }));
  const miss = await ask('/items/k');
  withheld(t, miss, 'MISS, own name');
  t.same(miss.headers['other-cache-control'], ['max-age=5'], 'a field this cache does not obey is forwarded');
  const hit = await ask('/items/k');
  t.equal(hit.xCache, 'HIT', 'Gateway-Cache-Control comes first');
  withheld(t, hit, 'HIT, own name');
  t.same(hit.headers['other-cache-control'], ['max-age=5']);

  use({ targetedCacheControl: [] });
  upstream.setHandler(answering({ 'cache-control': 'max-age=60', 'cdn-cache-control': 'no-store' }));
  const plain = await ask('/items/l');
  t.same(plain.headers['cdn-cache-control'], ['no-store'], 'no targeted fields configured: forwarded as it came');
});
