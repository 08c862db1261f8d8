// Invalidation by an unsafe request (RFC 9111 4.4) through the running gateway with its default 2
// workers and a real upstream: a successful POST drops its own URL and the same-origin URLs of its
// answer's Location and Content-Location, for both workers and in every variant; a cross-origin one and
// a failed request drop nothing. Plus the URL resolution rules on their own (src/cache/invalidation.ts),
// and, as a property, that a Location naming a URL drops the key a request for that URL is stored under.
import fc from 'fast-check';
import t, { type Test } from 'tap';
import { locationUrls } from '../../src/cache/invalidation.js';
import { primaryKey, requestOrigin, urlPrefix } from '../../src/cache/key.js';
import { AcceptPhase } from '../../src/lifecycle/accept.js';
import { startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { reloadWith } from '../helpers/reload.js';
import { askNamingWorker, eachWorkerAnswer, type WorkerAnswer } from '../helpers/cache-gateway.js';
import { testConfig as planeConfig } from '../helpers/upstream-server.js';

const app = await startUpstream(t, {
  name: 'app',
  handle: (req, res) => {
    const url = new URL(req.url ?? '/', 'http://upstream');
    if (req.method === 'POST') {
      const headers: Record<string, string> = {};
      const location = url.searchParams.get('location');
      const contentLocation = url.searchParams.get('content-location');
      if (location !== null) headers.location = location;
      if (contentLocation !== null) headers['content-location'] = contentLocation;
      res.writeHead(Number(url.searchParams.get('status') ?? 201), headers);
      res.end();
      return;
    }
    const headers: Record<string, string> = { 'content-type': 'text/plain', 'cache-control': 'max-age=600' };
    if (url.pathname.startsWith('/items/v')) headers.vary = 'x-variant';
    res.writeHead(200, headers);
    res.end(`${url.pathname}${url.search} ${String(req.headers['x-variant'] ?? '')} #${app.seen.get(`GET ${url.pathname}`)}`);
  },
});
const config = (middleware: unknown[]) =>
  testConfig(
    [
      {
        serviceType: 'static',
        serviceLocation: app.location,
        endpoints: [
          { method: 'GET', path: '/items/{id}' },
          { method: 'POST', path: '/items' },
          { method: 'POST', path: '/items/{id}' },
          // The cache disabled here: a successful PUT still invalidates what it changed.
          { method: 'PUT', path: '/items/{id}', 'x-disabled-middleware': ['cache'] },
        ],
      },
    ],
    { accessLog: { enabled: false }, middleware },
  );
const withCache = config([{ id: 'cache', type: 'responseCache' }]);
const gateway = await startGateway(t, {
  config: withCache,
  waitFor: (line) => line.msg === 'gateway operational',
  startTimeoutMs: 60_000,
});

/** One fresh connection: the health check names the worker, then the request on that connection. */
function ask(method: string, target: string, extra = ''): Promise<WorkerAnswer> {
  return askNamingWorker(gateway.port, method, target, `Host: gw.test:8080\r\n${extra}`);
}

/** The first answer of each worker to GET `target` (fresh connections spread over the workers). */
function eachWorker(target: string, extra = ''): Promise<Map<string, WorkerAnswer>> {
  return eachWorkerAnswer(gateway.port, target, `Host: gw.test:8080\r\n${extra}`);
}

/** Stores `target` and checks both workers hit it. */
async function storedForBoth(t: Test, target: string, extra = ''): Promise<void> {
  await ask('GET', target, extra);
  for (const [worker, answer] of await eachWorker(target, extra)) t.equal(answer.xCache, 'HIT', `${target} ${extra.trim()}: a HIT on worker ${worker}`);
}

async function expectRefetched(t: Test, target: string, path: string, extra = ''): Promise<void> {
  const before = app.seen.get(`GET ${path}`) ?? 0;
  const answers = await eachWorker(target, extra);
  const xCaches = [...answers.values()].map((answer) => answer.xCache).sort();
  t.same(xCaches, ['HIT', 'MISS'], `${target} ${extra.trim()}: one worker misses (the entry is gone for the instance), the other hits its new entry`);
  t.equal(app.seen.get(`GET ${path}`), before + 1, `${target} ${extra.trim()}: fetched once more for the instance`);
}

async function expectKept(t: Test, target: string, path: string): Promise<void> {
  const before = app.seen.get(`GET ${path}`) ?? 0;
  for (const [worker, answer] of await eachWorker(target)) t.equal(answer.xCache, 'HIT', `${target}: still a HIT on worker ${worker}`);
  t.equal(app.seen.get(`GET ${path}`), before, `${target}: not fetched again`);
}

t.test('a POST invalidates its Location and Content-Location (relative, absolute same-origin) for both workers', async (t) => {
  await storedForBoth(t, '/items/loc');
  await storedForBoth(t, '/items/cl?page=2');
  await storedForBoth(t, '/items/abs');
  await storedForBoth(t, '/items/untouched');
  const post = await ask('POST', `/items?location=${encodeURIComponent('items/loc')}&content-location=${encodeURIComponent('/items/cl?page=2')}`);
  t.equal(post.status, 201);
  await expectRefetched(t, '/items/loc', '/items/loc');
  await expectRefetched(t, '/items/cl?page=2', '/items/cl');
  await expectKept(t, '/items/untouched', '/items/untouched');
  const absolute = await ask('POST', `/items?location=${encodeURIComponent('http://GW.test:8080/items/./abs')}`);
  t.equal(absolute.status, 201);
  await expectRefetched(t, '/items/abs', '/items/abs');
});

t.test('a Location names its URL as a request for it is keyed: quotes, brackets and braces as the gateway normalizes them', async (t) => {
  // The URL parser would have escaped each of these (%27, %22, %3C, %7B, ...). The keys hold the query
  // as sent, and the normalized path, where a character a URI path may hold only escaped is escaped.
  const named: Array<[string, string, string]> = [
    ["/items/q1?name=O'Brien", 'location', '/items/q1'],
    ['/items/q2?name="x"', 'content-location', '/items/q2'],
    ["/items/q3?a=<b>&c='d'", 'location', '/items/q3'],
    ['/items/"p"<{`}>', 'location', '/items/%22p%22%3C%7B%60%7D%3E'],
    ['/items/%22p%22%3C%7B%60%7D%3E[]', 'location', '/items/%22p%22%3C%7B%60%7D%3E%5B%5D'],
  ];
  for (const [target] of named) await storedForBoth(t, target);
  for (const [target, field, forwarded] of named) {
    const post = await ask('POST', `/items?${field}=${encodeURIComponent(target)}`);
    t.equal(post.status, 201, `${field}: ${target}`);
    await expectRefetched(t, target, forwarded);
  }
  // Raw or escaped, one path: one key.
  await storedForBoth(t, '/items/%5Bs%5D');
  await expectKept(t, '/items/[s]', '/items/%5Bs%5D');
});

t.test('every variant of an invalidated URL goes, not only the one the next request asks for', async (t) => {
  await storedForBoth(t, '/items/var', 'X-Variant: a\r\n');
  await storedForBoth(t, '/items/var', 'X-Variant: b\r\n');
  const post = await ask('POST', `/items?location=${encodeURIComponent('/items/var')}`);
  t.equal(post.status, 201);
  await expectRefetched(t, '/items/var', '/items/var', 'X-Variant: b\r\n');
  await expectRefetched(t, '/items/var', '/items/var', 'X-Variant: a\r\n');
});

t.test('the target URI of a successful POST is invalidated under the GET endpoint too', async (t) => {
  await storedForBoth(t, '/items/target');
  const post = await ask('POST', '/items/target');
  t.equal(post.status, 201);
  await expectRefetched(t, '/items/target', '/items/target');
});

t.test('a successful PUT on an endpoint the cache is disabled for still invalidates its URL for both workers', async (t) => {
  await storedForBoth(t, '/items/put-target');
  const put = await ask('PUT', '/items/put-target');
  t.equal(put.status, 200);
  await expectRefetched(t, '/items/put-target', '/items/put-target');
});

t.test('a cache a reload removes and a later one brings back starts empty: what changed while it was gone is not served', async (t) => {
  await storedForBoth(t, '/items/while-away');
  t.match(await reloadWith(gateway, config([])), { ok: true, applied: true }, 'the cache removed');
  t.equal((await ask('PUT', '/items/while-away')).status, 200, 'a PUT the cache is not there to see');
  t.match(await reloadWith(gateway, withCache), { ok: true, applied: true }, 'the cache back, same id');
  await expectRefetched(t, '/items/while-away', '/items/while-away');
});

t.test('a cross-origin Location, another port, another scheme, and a failed POST invalidate nothing', async (t) => {
  await storedForBoth(t, '/items/kept');
  for (const location of ['http://elsewhere.test:8080/items/kept', 'http://gw.test:8081/items/kept', 'https://gw.test:8080/items/kept', '//elsewhere.test/items/kept']) {
    const post = await ask('POST', `/items?location=${encodeURIComponent(location)}`);
    t.equal(post.status, 201, location);
  }
  const failed = await ask('POST', `/items?status=500&location=${encodeURIComponent('/items/kept')}&content-location=${encodeURIComponent('/items/kept')}`);
  t.equal(failed.status, 500);
  const failedTarget = await ask('POST', '/items/kept?status=404');
  t.equal(failedTarget.status, 404);
  await expectKept(t, '/items/kept', '/items/kept');
});

t.test('locationUrls: same-origin resolution and the gateway\'s path normalization', async (t) => {
  const request = ['x-forwarded-proto', 'http', 'x-forwarded-host', 'api.test'];
  const urls = (location: string, headers = request) => locationUrls(false, '/a/b', 'q=1', headers, ['location', location]);
  t.same(urls('c'), [{ path: '/a/c', query: '' }], 'relative to the request URL');
  t.same(urls("/r?name=O'Brien&q=\"<x>\""), [{ path: '/r', query: 'name=O\'Brien&q="<x>"' }], 'the query as written');
  // A path as a request path is normalized: what a URI path may hold only escaped is escaped (it was
  // kept raw, as request paths were, before they were).
  t.same(urls('/p"<>`{}\\q'), [{ path: '/p%22%3C%3E%60%7B%7D\\q', query: '' }], 'the path as a request path normalizes, a backslash kept');
  t.same(urls('/a b?c d\xe9'), [{ path: '/a%20b', query: 'c%20d%E9' }], 'what a target cannot hold percent-encoded, a byte at a time (header values are latin1)');
  t.same(urls('/x/%2e%2E/../y'), [{ path: '/y', query: '' }], 'encoded dots are dot segments, as in a request path');
  t.same(urls('../../../z'), [{ path: '/z', query: '' }], 'a reference climbing above the root stops there');
  t.same(urls('?z'), [{ path: '/a/b', query: 'z' }], 'a query alone: the request path');
  t.same(urls('#f'), [{ path: '/a/b', query: 'q=1' }], 'a fragment alone: the request URL');
  t.same(urls('http:/z'), [{ path: '/z', query: '' }], 'the request scheme without a host: relative');
  t.same(urls('//api.test/z'), [{ path: '/z', query: '' }], 'no scheme: the request one');
  t.same(urls('//evil.test/z'), [], 'no scheme, another host');
  t.same(urls('http://api.test\\.evil.test/z'), [], 'an authority the URL parser would end early (at the \\): not read as the request host');
  t.same(urls('../x/%7e/%2f/?y=1'), [{ path: '/x/~/%2F', query: 'y=1' }], 'dot segments resolved, unreserved escapes decoded, trailing slash dropped');
  t.same(urls('HTTP://API.test:80/z'), [{ path: '/z', query: '' }], 'scheme and host compared case-insensitively, the default port implied');
  t.same(urls('http://api.test:81/z'), [], 'another port');
  t.same(urls('https://api.test/z'), [], 'another scheme');
  t.same(urls('mailto:x@api.test'), [], 'not an http URL');
  t.same(urls('https://api.test/z', ['x-forwarded-proto', 'https', 'x-forwarded-host', 'api.test']), [{ path: '/z', query: '' }], 'the scheme the client used');
  t.same(urls('/z', []), [{ path: '/z', query: '' }], 'no Host: a relative reference is still same-origin');
  t.same(urls('http://api.test/z', []), [], 'no Host: an absolute one is not');
  // The cache keys the whole forwarded values: a list names no host an absolute URL can have.
  const listed = ['x-forwarded-proto', 'http', 'x-forwarded-host', 'evil.test, api.test'];
  t.same(urls('http://api.test/z', listed), [], "a host list: not its last item's origin");
  t.same(urls('http://evil.test/z', listed), [], "nor its first item's");
  t.same(urls('/z', listed), [{ path: '/z', query: '' }], 'a host list: relative references still are');
  const protoList = ['x-forwarded-proto', 'https, http', 'x-forwarded-host', 'api.test'];
  t.same(urls('http://api.test/z', protoList), [], 'a scheme list: not its last item');
  t.same(urls('https://api.test/z', protoList), [], 'nor its first');
  t.same(urls('z', protoList), [{ path: '/a/z', query: '' }], 'a scheme list: relative references still are');
  t.same(urls('HTTPS://api.test/z', ['x-forwarded-proto', ' HTTPS ', 'x-forwarded-host', 'API.test:443']), [{ path: '/z', query: '' }], 'the scheme and host compared as the key writes them (case, spaces, default port)');
  t.same(locationUrls(false, '/a', '', request, ['location', '/same', 'content-location', '/same']), [{ path: '/same', query: '' }], 'named twice, returned once');
  t.same(locationUrls(false, '/a', '', request, ['content-type', 'text/plain']), [], 'neither field');
});

t.test('property: a Location naming the URL of a request drops the key that request is stored under', async (t) => {
  // The request side is the gateway's own: the accept phase's path (characters, normalization) and the
  // key of src/cache/key.ts with the raw query.
  const accept = new AcceptPhase(planeConfig({ encodedSlashes: 'keep' }), '1.1 test');
  const request = ['x-forwarded-proto', 'http', 'x-forwarded-host', 'api.test'];
  const origin = requestOrigin(false, 'http', 'api.test');
  const visible = Array.from({ length: 0x7e - 0x20 }, (_, i) => String.fromCharCode(0x21 + i)).filter((c) => c !== '#' && c !== '%');
  const escape = fc.tuple(fc.integer({ min: 0, max: 255 }), fc.boolean()).map(([byte, lower]) => {
    const hex = byte.toString(16).padStart(2, '0');
    return `%${lower ? hex : hex.toUpperCase()}`;
  });
  const text = (chars: string[], maxLength: number) => fc.array(fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...chars) }, { weight: 1, arbitrary: escape }), { maxLength }).map((parts) => parts.join(''));
  const segment = fc.oneof(fc.constantFrom('', '.', '..', '%2e', '%2E%2e', '.%2E'), text(visible.filter((c) => c !== '/' && c !== '?'), 6));
  const path = fc.array(segment, { minLength: 1, maxLength: 5 }).map((segments) => `/${segments.join('/')}`);
  const query = fc.oneof(fc.constant(''), text(visible, 10));
  const form = fc.constantFrom('absolute path', 'absolute URL', 'no scheme', 'relative');
  fc.assert(
    fc.property(path, query, form, (rawPath, rawQuery, how) => {
      const routed = accept.checkTarget(rawPath, rawQuery);
      // A target the gateway refuses has no key.
      if (typeof routed !== 'string') return true;
      // `//x` as a reference names the host x: this path is named with a host only.
      if (how === 'absolute path' && rawPath.startsWith('//')) return true;
      const target = rawQuery === '' ? rawPath : `${rawPath}?${rawQuery}`;
      const reference = how === 'absolute URL' ? `HTTP://API.test:80${target}` : how === 'no scheme' ? `//api.test${target}` : how === 'relative' ? `..${target}` : target;
      const key = primaryKey(origin, '/items/{id}', routed, rawQuery);
      const urls = locationUrls(false, '/base/x', 'b=1', request, ['location', reference]);
      if (urls.length === 1 && key.startsWith(urlPrefix(origin, urls[0]!.path, urls[0]!.query))) return true;
      throw new Error(`request ${target} is keyed ${JSON.stringify(key)}; Location ${reference} dropped ${JSON.stringify(urls)}`);
    }),
    { numRuns: 3000 },
  );
  t.pass('every Location dropped the key of its request');
});
