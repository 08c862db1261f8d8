// What a 304 does to a stale entry (RFC 9111 4.3.4), through a real data plane, a real upstream and raw
// client sockets: a 304 naming another representation (another ETag, another Last-Modified) never
// freshens the stored one, neither on a request nor in a stale-while-revalidate refresh; the request
// goes again without conditions and the client gets the current answer. A client's own conditional
// request on a stale entry revalidates the entry and is answered from it.
import type http from 'node:http';
import t from 'tap';
import { Counters } from '../../src/metrics/counters.js';
import type { Pipeline } from '../../src/middleware/pipeline.js';
import { buildPipeline } from '../../src/middleware/registry.js';
import { rawRequest } from '../helpers/raw-http.js';
import { entry, startUpstream } from '../helpers/upstream-server.js';
import { planeInFrontOf } from '../helpers/data-plane.js';

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const plane = await planeInFrontOf(t, upstream.url, [entry('GET', '/items/{id}', upstream.url)]);

let current: Pipeline | null = null;
function use(): void {
  void current?.close();
  current = buildPipeline(
    [{ id: 'cache', type: 'responseCache', slaMs: 1000, store: 'local', maxEntryBytes: 131072, maxBytes: 67108864, defaultTtlMs: 0, staleIfErrorMs: 60000 }],
    { metrics: new Counters(), warn: () => {} },
  );
  plane.setPipeline(current);
}

/** The resource as the upstream has it now: its 200, and the 304 it answers any conditional request with. */
let resource: { headers: http.OutgoingHttpHeaders; body: string; notModified: http.OutgoingHttpHeaders | null } = { headers: {}, body: '', notModified: null };
/** The conditions each upstream request carried: If-None-Match, else If-Modified-Since, else '-'. */
let conditions: string[] = [];

function serve(): void {
  conditions = [];
  upstream.setHandler((req, res) => {
    const condition = req.headers['if-none-match'] ?? req.headers['if-modified-since'];
    conditions.push(condition ?? '-');
    if (condition !== undefined && resource.notModified !== null) {
      res.writeHead(304, resource.notModified);
      res.end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(resource.body), ...resource.headers });
    res.end(resource.body);
  });
}

async function get(path: string, headers = '') {
  const res = await rawRequest(plane.port, `GET ${path} HTTP/1.1\r\nHost: gw\r\n${headers}\r\n`, { responses: 1, waitMs: 5000 });
  const response = res.responses[0]!;
  return { status: response.status, xCache: response.headers['x-cache']?.join(','), etag: response.headers.etag?.[0], lastModified: response.headers['last-modified']?.[0], body: response.body.toString() };
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const MODIFIED_1 = 'Wed, 21 Oct 2015 07:28:00 GMT';
const MODIFIED_2 = 'Thu, 22 Oct 2015 07:28:00 GMT';

t.test('a 304 with another ETag does not freshen the stored answer: the request goes again without conditions', async (t) => {
  use();
  serve();
  resource = { headers: { etag: '"v1"', 'cache-control': 'max-age=1' }, body: 'V1BODY', notModified: null };
  t.equal((await get('/items/etag')).xCache, 'MISS');
  await delay(2100);
  // The upstream now has "v2", and answers any conditional request 304 with its ETag.
  resource = { headers: { etag: '"v2"', 'cache-control': 'max-age=60' }, body: 'V2BODY', notModified: { etag: '"v2"', 'cache-control': 'max-age=60' } };
  const answer = await get('/items/etag');
  t.same([answer.status, answer.xCache, answer.body, answer.etag], [200, 'MISS', 'V2BODY', '"v2"'], 'the current answer, not V1BODY under "v2"');
  t.same(conditions, ['-', '"v1"', '-'], 'revalidated with "v1", then asked again without conditions');
  const after = await get('/items/etag');
  t.same([after.xCache, after.body, after.etag], ['HIT', 'V2BODY', '"v2"'], 'the new answer is what is stored');
  t.equal(conditions.length, 3);
});

t.test('a Last-Modified entry: a 304 with another date does not freshen it, one with the same date or none does', async (t) => {
  use();
  serve();
  resource = { headers: { 'last-modified': MODIFIED_1, 'cache-control': 'max-age=1' }, body: 'OLD', notModified: null };
  await get('/items/lm-other');
  await delay(2100);
  resource = { headers: { 'last-modified': MODIFIED_2, 'cache-control': 'max-age=60' }, body: 'NEW', notModified: { 'last-modified': MODIFIED_2, 'cache-control': 'max-age=60' } };
  const other = await get('/items/lm-other');
  t.same([other.status, other.xCache, other.body, other.lastModified], [200, 'MISS', 'NEW', MODIFIED_2], 'another date: the current answer');
  t.same(conditions, ['-', MODIFIED_1, '-']);
  t.same([(await get('/items/lm-other')).xCache, (await get('/items/lm-other')).body], ['HIT', 'NEW']);

  serve();
  resource = { headers: { 'last-modified': MODIFIED_1, 'cache-control': 'max-age=1' }, body: 'SAME', notModified: null };
  await get('/items/lm-same');
  await get('/items/lm-none');
  await delay(2100);
  resource.notModified = { 'last-modified': MODIFIED_1, 'cache-control': 'max-age=60' };
  const same = await get('/items/lm-same');
  t.same([same.status, same.xCache, same.body], [200, 'REVALIDATED', 'SAME'], 'the same date: freshened');
  resource.notModified = { 'cache-control': 'max-age=60' };
  const none = await get('/items/lm-none');
  t.same([none.status, none.xCache, none.body], [200, 'REVALIDATED', 'SAME'], 'no validator in the 304 (RFC 9110 15.4.5 allows it): freshened');
  t.same([(await get('/items/lm-same')).xCache, (await get('/items/lm-none')).xCache], ['HIT', 'HIT']);
  t.same(conditions, ['-', '-', MODIFIED_1, MODIFIED_1]);
});

t.test('stale-while-revalidate: a background 304 with another ETag does not freshen the entry; the refresh fetches the new one', async (t) => {
  use();
  serve();
  resource = { headers: { etag: '"s1"', 'cache-control': 'max-age=1, stale-while-revalidate=30' }, body: 'S1BODY', notModified: null };
  await get('/items/swr');
  await delay(2100);
  resource = { headers: { etag: '"s2"', 'cache-control': 'max-age=60' }, body: 'S2BODY', notModified: { etag: '"s2"', 'cache-control': 'max-age=60' } };
  const stale = await get('/items/swr');
  t.same([stale.xCache, stale.body], ['UPDATING', 'S1BODY']);
  // The refresh loads its HTTP client the first time: wait for the entry to change rather than a fixed time.
  let after = await get('/items/swr');
  for (const deadline = Date.now() + 10_000; after.xCache === 'UPDATING' && Date.now() < deadline; ) {
    await delay(100);
    after = await get('/items/swr');
  }
  t.same([after.xCache, after.body, after.etag], ['HIT', 'S2BODY', '"s2"'], 'the new answer, not S1BODY under "s2"');
  t.same(conditions, ['-', '"s1"', '-'], 'refreshed with "s1", then asked again without conditions');
});

t.test("a client's conditional request on a stale entry revalidates the entry and is answered from it", async (t) => {
  use();
  serve();
  resource = { headers: { etag: '"c1"', 'cache-control': 'max-age=1' }, body: 'CBODY', notModified: null };
  await get('/items/client-match');
  await get('/items/client-other');
  await delay(2100);
  resource = { headers: { etag: '"c1"', 'cache-control': 'max-age=60' }, body: 'CBODY', notModified: { etag: '"c1"', 'cache-control': 'max-age=60' } };
  const match = await get('/items/client-match', 'If-None-Match: "c1"\r\n');
  t.same([match.status, match.xCache, match.etag, match.body], [304, 'REVALIDATED', '"c1"', ''], 'its If-None-Match matches the revalidated entry: 304');
  t.same((await get('/items/client-match')).xCache, 'HIT', 'the entry was freshened');
  const other = await get('/items/client-other', 'If-None-Match: "zz"\r\n');
  t.same([other.status, other.xCache, other.body], [200, 'REVALIDATED', 'CBODY'], 'another tag: the whole revalidated entry');
  t.same(conditions, ['-', '-', '"c1"', '"c1"'], "the upstream was asked with the entry's validator, not the client's");
});
