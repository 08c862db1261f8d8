// apiKeyAuth through a real data plane and a real upstream (docs/reference/api-key-auth.md): 401 with a challenge for a
// missing or unknown key, X-Consumer to the upstream (never the client's), the key hidden, a query key,
// x-disabled-middleware, and a body held while the decision is made.
import t from 'tap';
import { Counters } from '../../src/metrics/counters.js';
import { sha256Hex } from '../../src/middleware/api-key-auth.js';
import { buildPipeline, type MiddlewareConfig } from '../../src/middleware/registry.js';
import { RequestContext } from '../../src/exchange/context.js';
import { rawRequest } from '../helpers/raw-http.js';
import { entry, startUpstream } from '../helpers/upstream-server.js';
import { planeInFrontOf } from '../helpers/data-plane.js';
import { storeLookup } from '../helpers/stores.js';

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const counters = new Counters();
const plane = await planeInFrontOf(t, upstream.url, [
    entry('GET', '/items/{id}', upstream.url),
    entry('POST', '/items', upstream.url),
    entry('GET', '/public', upstream.url, { disabledMiddleware: ['auth'] }),
  ]);

function auth(overrides: Partial<MiddlewareConfig> = {}): MiddlewareConfig {
  return {
    id: 'auth',
    type: 'apiKeyAuth',
    slaMs: 100,
    header: 'x-api-key',
    query: null,
    keys: [
      { consumer: 'alice', sha256: sha256Hex('alice-secret') },
      { consumer: 'bob', sha256: sha256Hex('bob-secret').toUpperCase() },
    ],
    hideCredentials: true,
    ...overrides,
  } as MiddlewareConfig;
}

function use(config: MiddlewareConfig): void {
  plane.setPipeline(buildPipeline([config], { metrics: counters, warn: () => {} }));
}

/** `untilClose`: wait for the server to close the connection rather than for the first response. */
async function send(request: string, untilClose = false) {
  const before = upstream.requests.length;
  const res = await rawRequest(plane.port, request, untilClose ? { waitMs: 3000 } : { responses: 1, waitMs: 3000 });
  const response = res.responses[0];
  return { status: response?.status, headers: response?.headers ?? {}, body: response?.body.toString() ?? '', reached: upstream.requests.length > before, closed: res.closedByServer };
}

const get = (path: string, headers = '') => send(`GET ${path} HTTP/1.1\r\nHost: gw\r\n${headers}\r\n`);

t.test('no key, an unknown key: 401 problem+json with the challenge; the upstream sees nothing', async (t) => {
  use(auth());
  for (const [name, res] of [['no key', await get('/items/1')], ['unknown key', await get('/items/1', 'X-Api-Key: mallory\r\n')]] as const) {
    t.equal(res.status, 401, name);
    t.same(res.headers['www-authenticate'], ['ApiKey header="x-api-key"'], `${name}: challenge`);
    t.same(res.headers['content-type'], ['application/problem+json']);
    t.match(JSON.parse(res.body), { status: 401, title: 'Unauthorized' });
    t.notOk(res.reached, `${name}: not forwarded`);
  }
});

t.test('a good key: X-Consumer to the upstream, the client\'s own removed, the key hidden', async (t) => {
  use(auth());
  const res = await get('/items/1', 'X-Api-Key: alice-secret\r\nX-Consumer: admin\r\nX-Consumer: root\r\n');
  t.equal(res.status, 200);
  const seen = upstream.requests[upstream.requests.length - 1]!;
  t.equal(seen.headers['x-consumer'], 'alice', 'only the gateway\'s X-Consumer');
  t.notOk('x-api-key' in seen.headers, 'hideCredentials: the key is not forwarded');
  const upper = await get('/items/2', 'X-Api-Key: bob-secret\r\n');
  t.equal(upper.status, 200, 'digests compare case-insensitively');
  t.equal(upstream.requests[upstream.requests.length - 1]!.headers['x-consumer'], 'bob');
  use(auth({ hideCredentials: false }));
  await get('/items/3', 'X-Api-Key: alice-secret\r\n');
  t.equal(upstream.requests[upstream.requests.length - 1]!.headers['x-api-key'], 'alice-secret', 'hideCredentials false: forwarded');
});

t.test('a key header on several field lines is one value ("a, b"): 401 whichever line holds the good key', async (t) => {
  use(auth());
  for (const lines of ['X-Api-Key: alice-secret\r\nX-Api-Key: wrong\r\n', 'X-Api-Key: wrong\r\nX-Api-Key: alice-secret\r\n', 'X-Api-Key: alice-secret, wrong\r\n']) {
    const res = await get('/items/1', lines);
    t.equal(res.status, 401, JSON.stringify(lines));
    t.notOk(res.reached, 'not forwarded');
  }
});

t.test('a query key, taken out of the forwarded query when hidden', async (t) => {
  use(auth({ query: 'apikey' }));
  const res = await get('/items/1?a=1&apikey=alice%2Dsecret&b=%20x');
  t.equal(res.status, 200);
  const seen = upstream.requests[upstream.requests.length - 1]!;
  t.equal(seen.url, '/items/1?a=1&b=%20x', 'the other parameters stay byte for byte');
  t.equal(seen.headers['x-consumer'], 'alice');
  const missing = await get('/items/1?apikey=');
  t.equal(missing.status, 401, 'an empty key is no key');
  t.same(missing.headers['www-authenticate'], ['ApiKey header="x-api-key", query="apikey"'], 'the challenge names the query parameter too');
  use(auth({ query: 'key "x"\r\nx-evil: 1' }));
  const odd = await get('/items/1');
  t.same(odd.headers['www-authenticate'], ['ApiKey header="x-api-key", query="key%20%22x%22%0D%0Ax-evil%3A%201"'], 'an odd name is percent-encoded');
  t.equal(odd.headers['x-evil'], undefined);
});

t.test('a hidden query key leaves the query whatever the answer: a refused request logs no key either', async (t) => {
  const middleware = buildPipeline([auth({ query: 'apikey' })], { metrics: counters, warn: () => {} });
  const decideOn = (query: string) => {
    const ctx = new RequestContext({ method: 'GET', url: '/items/1', query, peer: '127.0.0.1', startedAt: 0, xForwardedFor: undefined, hasBody: false, secure: false, contentLength: -1, forward: [] });
    const entry = middleware.entries[0]!;
    const decision = entry.decide(ctx) as { status?: number } | undefined;
    return { status: decision?.status ?? 200, query: ctx.query };
  };
  t.same(decideOn('a=1&apikey=wrong-key'), { status: 401, query: 'a=1' }, 'an unknown key');
  t.same(decideOn('apikey=EVIL&apikey=alice-secret&b=2'), { status: 401, query: 'b=2' }, 'a good key behind a bad one');
  t.same(decideOn('apikey=alice-secret;apikey=EVIL'), { status: 401, query: '' }, 'a value that runs on past a ";"');
  t.same(decideOn('apikey=alice-secret&c=3'), { status: 200, query: 'c=3' }, 'admitted, as before');
});

t.test('x-disabled-middleware: the endpoint is public, and still gets no client X-Consumer or hidden key', async (t) => {
  use(auth());
  const res = await get('/public', 'X-Consumer: spoofed\r\nX-Api-Key: alice-secret\r\n');
  t.equal(res.status, 200);
  const seen = upstream.requests[upstream.requests.length - 1]!;
  t.equal(seen.headers['x-consumer'], undefined, 'the client cannot name a consumer where auth does not run');
  t.equal(seen.headers['x-api-key'], undefined, 'hideCredentials: the key is not forwarded there either');
});

t.test('a request body arrives whole through the pipeline; a refused one is not read', async (t) => {
  use(auth());
  const body = 'x'.repeat(200_000);
  const ok = await send(`POST /items HTTP/1.1\r\nHost: gw\r\nX-Api-Key: alice-secret\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
  t.equal(ok.status, 200);
  const seen = upstream.requests[upstream.requests.length - 1]!;
  t.equal(seen.bodyBytes, body.length, 'every byte forwarded');
  t.equal(seen.body.toString(), body);
  const refused = await send(`POST /items HTTP/1.1\r\nHost: gw\r\nContent-Length: ${body.length}\r\n\r\n${body}`, true);
  t.equal(refused.status, 401);
  t.notOk(refused.reached);
  t.ok(refused.closed, 'the connection is closed: the unread body cannot be skipped');
});

t.test('counted per middleware id', async (t) => {
  const counted = counters.take() ?? {};
  t.ok(counted['middleware.auth.admitted']! >= 5, `admitted ${counted['middleware.auth.admitted']}`);
  t.ok(counted['middleware.auth.rejected.401']! >= 4, `rejected.401 ${counted['middleware.auth.rejected.401']}`);
});

t.test('a key withheld by one apiKeyAuth still decides for the middleware after it', async (t) => {
  // Two entries on one header, the first hiding it (docs/reference/api-key-auth.md): a request needs a
  // good key for each, and the second reads the header as the client sent it.
  const second = { ...auth({ id: 'auth2', hideCredentials: false }), keys: [{ consumer: 'alice2', sha256: sha256Hex('alice-secret') }] } as MiddlewareConfig;
  plane.setPipeline(buildPipeline([auth(), second], { metrics: counters, warn: () => {} }));
  const both = await get('/items/1', 'X-Api-Key: alice-secret\r\n');
  t.equal(both.status, 200, 'the second entry reads the key the first withheld');
  t.equal(upstream.requests[upstream.requests.length - 1]!.headers['x-api-key'], undefined, 'and the upstream still does not get it');
  t.equal((await get('/items/1', 'X-Api-Key: bob-secret\r\n')).status, 401, "a key only the first knows is refused by the second");

  // A rate limit keyed on that header, after the entry that withheld it, keys on the client's key, not on its address.
  const keys: string[] = [];
  const recording = { name: 'recording', take: (key: string) => (keys.push(key), { admitted: true, remaining: 1, resetMs: 0, retryAfterMs: 0 }) };
  const limit = { id: 'limit', type: 'rateLimit', slaMs: 200, limit: 5, windowMs: 10_000, key: 'header:x-api-key', scope: 'global', store: 'recording', onStoreError: 'deny' } as MiddlewareConfig;
  plane.setPipeline(buildPipeline([auth(), limit], { metrics: counters, warn: () => {}, stores: storeLookup({ rateLimit: (name) => (name === 'recording' ? recording : undefined) }) }));
  t.equal((await get('/items/1', 'X-Api-Key: alice-secret\r\n')).status, 200);
  t.match(keys, [/\|h:alice-secret$/], 'the bucket is the key\'s');
});
