import t from 'tap';
import { Agent, request } from 'undici';
import { startDataPlane } from '../../src/proxy/data-plane.js';
import { recordInto, type FinishedInfo } from '../helpers/finished.js';
import { RoutingTable } from '../../src/routing/table.js';
import { rawRequest } from '../helpers/raw-http.js';
import { afterBody, echoHandler, entry, startUpstream, testConfig, type Upstream } from '../helpers/upstream-server.js';

const a = await startUpstream();
const b = await startUpstream();
const config = testConfig({
  upstreams: [
    { serviceType: 'static', serviceLocation: a.url, weight: 1, specPath: '/spec' },
    { serviceType: 'static', serviceLocation: b.url, weight: 1, specPath: '/spec' },
  ],
});
const done: FinishedInfo[] = [];
const plane = await startDataPlane({
  config,
  listeners: [recordInto(done)],
  builtins: (method, path) =>
    path === '/healthcheck' && method === 'GET'
      ? { status: 200, headers: { 'content-type': 'application/json' }, body: '{"builtin":true}' }
      : null,
});
const { table, problems } = RoutingTable.compile([
  entry('GET', '/users/{id}', a.url),
  entry('POST', '/users', a.url),
  entry('GET', '/orders/{id}', b.url),
  entry('GET', '/both', a.url),
  entry('GET', '/both', b.url),
  entry('HEAD', '/docs', b.url),
  entry('GET', '/docs', b.url),
  entry('GET', '/healthcheck', a.url),
  entry('GET', '/listeners', a.url, { disabledListeners: ['accessLog'] }),
]);
if (problems.length > 0) throw new Error(problems.map((p) => p.message).join('\n'));
plane.setTable(table);

const agent = new Agent({ keepAliveTimeout: 1000 });
const base = `http://127.0.0.1:${plane.port}`;

t.teardown(async () => {
  await agent.close();
  await plane.close();
  await a.close();
  await b.close();
});

function last(upstream: Upstream) {
  const request = upstream.requests[upstream.requests.length - 1];
  if (request === undefined) throw new Error(`${upstream.url} got no request`);
  return request;
}

async function get(path: string, headers: Record<string, string> = {}, method = 'GET') {
  const res = await request(`${base}${path}`, { method: method as 'GET', headers, dispatcher: agent });
  const text = await res.body.text();
  return { status: res.statusCode, headers: res.headers, text };
}

t.test('a request lands on the upstream the table selects', async (t) => {
  const beforeA = a.requests.length;
  const beforeB = b.requests.length;
  t.equal((await get('/users/7')).status, 200);
  t.equal((await get('/orders/9')).status, 200);
  t.equal(a.requests.length, beforeA + 1);
  t.equal(b.requests.length, beforeB + 1);
  t.equal(last(a).url, '/users/7');
  t.equal(last(b).url, '/orders/9');
});

t.test('method, normalized path, raw query and end-to-end headers are forwarded', async (t) => {
  const res = await rawRequest(
    plane.port,
    'GET /users/./x/../42?b=%20x&a=1&&c HTTP/1.1\r\n' +
      'Host: gw.example:8080\r\n' +
      'User-Agent: raw-test\r\n' +
      'Accept: application/json\r\n' +
      'X-Multi: one\r\n' +
      'X-Multi: two\r\n' +
      'X-Custom: kept\r\n' +
      'Connection: keep-alive, X-Named-Hop\r\n' +
      'X-Named-Hop: dropped\r\n' +
      'Keep-Alive: timeout=5\r\n' +
      'TE: trailers\r\n' +
      'Trailer: X-T\r\n' +
      'Proxy-Authorization: Basic Zm9vOmJhcg==\r\n' +
      'Proxy-Connection: keep-alive\r\n' +
      'X-Forwarded-For: 203.0.113.9\r\n' +
      'X-Forwarded-Proto: https\r\n' +
      'Via: 1.0 edge\r\n' +
      '\r\n',
    { responses: 1 },
  );
  t.equal(res.responses[0]?.status, 200);
  const seen = last(a);
  t.equal(seen.method, 'GET');
  t.equal(seen.url, '/users/42?b=%20x&a=1&&c', 'routed path, query untouched');
  t.equal(seen.headers['user-agent'], 'raw-test');
  t.equal(seen.headers.accept, 'application/json');
  t.equal(seen.headers['x-custom'], 'kept');
  t.same(
    seen.rawHeaders.filter((_, i, all) => i % 2 === 1 && all[i - 1]!.toLowerCase() === 'x-multi'),
    ['one', 'two'],
    'repeated headers keep both values in order',
  );
  for (const hop of ['x-named-hop', 'keep-alive', 'te', 'trailer', 'proxy-authorization', 'proxy-connection']) {
    t.notOk(hop in seen.headers, `${hop} not forwarded`);
  }
  t.not(seen.headers.connection, 'keep-alive, X-Named-Hop', "the client's Connection is not forwarded");
  t.equal(seen.headers.host, `127.0.0.1:${a.port}`, "the upstream's own Host");
  t.equal(seen.headers['x-forwarded-for'], '127.0.0.1', "an untrusted peer's own X-Forwarded-For is replaced by the peer");
  t.equal(seen.headers['x-forwarded-proto'], 'http', 'untrusted client value replaced (no trustedProxies)');
  t.equal(seen.headers['x-forwarded-host'], 'gw.example:8080');
  t.equal(seen.headers.via, '1.0 edge, 1.1 specgate-test');
  t.same(res.responses[0]!.headers.via, ['1.1 specgate-test'], 'Via on the response');
});

// "keep-alive" and "close" as clients write them are read without parsing the list (client-request-head.ts); every
// other form is parsed. Two requests on one connection, the second a read later (uWS does not pipeline asynchronous
// answers, native-notes.md): it is answered only if the first kept the connection open.
t.test("the client's Connection header: close in any form closes after the answer, keep-alive keeps it open", async (t) => {
  const cases: Array<[string, boolean]> = [
    ['close', true],
    ['Close', true],
    ['keep-alive, close', true],
    ['keep-alive', false],
    ['Keep-Alive', false],
    ['keep-alive, X-Named-Hop', false],
  ];
  for (const [value, closes] of cases) {
    const before = a.requests.length;
    const res = await rawRequest(
      plane.port,
      [`GET /users/1 HTTP/1.1\r\nHost: gw\r\nConnection: ${value}\r\nX-Named-Hop: dropped\r\n\r\n`, 'GET /users/2 HTTP/1.1\r\nHost: gw\r\n\r\n'],
      { responses: closes ? undefined : 2, waitMs: 3000, partDelayMs: 300 },
    );
    t.equal(res.responses[0]?.status, 200, `${value}: answered`);
    t.equal(res.responses.length, closes ? 1 : 2, `${value}: ${closes ? 'the second request is not read' : 'the second request is answered too'}`);
    if (closes) t.ok(res.closedByServer && !res.timedOut, `${value}: the connection closed`);
    t.same(res.responses[0]?.headers.connection, closes ? ['close'] : undefined, `${value}: ${closes ? 'the answer says so' : 'no Connection header'}`);
    t.equal(a.requests.length, before + (closes ? 1 : 2));
    const named = /x-named-hop/i.test(value);
    t.equal('x-named-hop' in a.requests[before]!.headers, !named, `${value}: X-Named-Hop ${named ? 'named, not forwarded' : 'forwarded'}`);
  }
});

t.test("a client's empty Via adds no empty list element to the Via forwarded", async (t) => {
  const res = await rawRequest(plane.port, 'GET /users/42 HTTP/1.1\r\nHost: gw.example\r\nVia: \r\n\r\n', { responses: 1 });
  t.equal(res.responses[0]?.status, 200);
  t.equal(last(a).headers.via, '1.1 specgate-test');
});

t.test('hop-by-hop response headers are dropped, Via appended to the upstream one', async (t) => {
  a.setHandler((req, res, recorded) => {
    afterBody(req, recorded, () => {
      res.setHeader('Connection', 'keep-alive, X-Upstream-Hop');
      res.setHeader('Keep-Alive', 'timeout=5');
      res.setHeader('X-Upstream-Hop', 'secret');
      res.setHeader('Proxy-Authenticate', 'Basic');
      res.setHeader('Via', '1.1 app-server');
      res.setHeader('X-End-To-End', 'yes');
      res.end('ok');
    });
  });
  t.teardown(() => a.setHandler(echoHandler));
  const res = await rawRequest(plane.port, 'GET /users/1 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  const response = res.responses[0]!;
  t.equal(response.status, 200);
  t.equal(response.body.toString(), 'ok');
  t.same(response.headers['x-end-to-end'], ['yes']);
  t.same(response.headers.via, ['1.1 app-server, 1.1 specgate-test']);
  t.notOk(response.headers['x-upstream-hop'], 'header named by the upstream Connection dropped');
  t.notOk(response.headers['keep-alive']);
  t.notOk(response.headers['proxy-authenticate']);
  t.same(response.headers.connection ?? [], [], 'no upstream Connection header');
  t.equal(response.headers.date?.length, 1, 'one Date (the gateway writes its own)');
});

t.test('an answer with more headers than the per-exchange bit masks hold: the later ones are filtered the same way', async (t) => {
  a.setHandler((req, res, recorded) => {
    afterBody(req, recorded, () => {
      const head: string[] = [];
      for (let i = 0; i < 40; i++) head.push(`X-Many-${i}`, String(i));
      // Past the 31st header: hop-by-hop ones and one end-to-end one.
      head.push('Connection', 'keep-alive, X-Late-Hop', 'Keep-Alive', 'timeout=5', 'X-Late-Hop', 'secret');
      head.push('Proxy-Authenticate', 'Basic', 'X-Late-End', 'yes', 'Content-Length', '2');
      res.writeHead(200, head);
      res.end('ok');
    });
  });
  t.teardown(() => a.setHandler(echoHandler));
  const res = await rawRequest(plane.port, 'GET /users/1 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  const response = res.responses[0]!;
  t.equal(response.status, 200);
  t.equal(response.body.toString(), 'ok');
  for (let i = 0; i < 40; i++) t.same(response.headers[`x-many-${i}`], [String(i)], `x-many-${i}`);
  t.same(response.headers['x-late-end'], ['yes']);
  t.notOk(response.headers['x-late-hop'], 'header named by the upstream Connection dropped');
  t.notOk(response.headers['keep-alive']);
  t.notOk(response.headers['proxy-authenticate']);
  t.same(response.headers['content-length'], ['2'], "one Content-Length: uWS's, the upstream's is not repeated");
});

t.test('request bodies arrive intact: Content-Length and chunked', async (t) => {
  const res = await request(`${base}/users`, { method: 'POST', body: 'x'.repeat(100_000), dispatcher: agent });
  t.equal(res.statusCode, 200);
  const echoed = (await res.body.json()) as { bodyBytes: number; headers: Record<string, string> };
  t.equal(echoed.bodyBytes, 100_000);
  t.equal(echoed.headers['content-length'], '100000');
  t.equal(last(a).body.toString(), 'x'.repeat(100_000));

  const chunked = await rawRequest(
    plane.port,
    ['POST /users HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n', '6\r\n world\r\n0\r\n\r\n'],
    { responses: 1, partDelayMs: 50 },
  );
  t.equal(chunked.responses[0]?.status, 200);
  t.equal(last(a).body.toString(), 'hello world');
  t.notOk('content-length' in last(a).headers && last(a).headers['transfer-encoding'], 'framed one way only');
});

t.test('404, 405 with Allow, automatic OPTIONS, as problem+json', async (t) => {
  const before = a.requests.length + b.requests.length;
  const notFound = await get('/nowhere');
  t.equal(notFound.status, 404);
  t.equal(notFound.headers['content-type'], 'application/problem+json');
  t.same(JSON.parse(notFound.text), { type: 'about:blank', title: 'Not Found', status: 404, detail: 'no endpoint matches this path' });

  const notAllowed = await get('/users/1', {}, 'DELETE');
  t.equal(notAllowed.status, 405);
  t.equal(notAllowed.headers.allow, 'GET, HEAD, OPTIONS');
  t.match(JSON.parse(notAllowed.text), { title: 'Method Not Allowed', status: 405 });
  t.notMatch(notAllowed.text, /at .*\.js/, 'no stack trace');

  const options = await get('/users/1', {}, 'OPTIONS');
  t.equal(options.status, 200);
  t.equal(options.headers.allow, 'GET, HEAD, OPTIONS');
  t.equal(options.text, '');
  t.equal(options.headers['content-length'], '0');
  t.equal(a.requests.length + b.requests.length, before, 'nothing forwarded');
});

t.test('HEAD: served by GET without a body, or forwarded as HEAD when declared', async (t) => {
  const viaGet = await rawRequest(plane.port, 'HEAD /users/5 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1, head: true, waitMs: 2000 });
  const response = viaGet.responses[0]!;
  t.equal(response?.status, 200);
  t.equal(last(a).method, 'GET', 'the upstream got GET');
  const getLength = Buffer.byteLength(
    JSON.stringify({ method: 'GET', url: '/users/5', headers: last(a).headers, bodyBytes: 0 }),
  );
  t.same(response.headers['content-length'], [String(getLength)], "the GET's Content-Length is kept");
  t.equal(viaGet.data.length - viaGet.data.indexOf('\r\n\r\n') - 4, 0, 'no body bytes on the wire');

  // The connection is still usable after a HEAD (nothing left over from the GET's body).
  const twice = await rawRequest(plane.port, 'HEAD /users/5 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1, head: true });
  t.equal(twice.responses[0]?.status, 200);

  const declared = await rawRequest(plane.port, 'HEAD /docs HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1, head: true });
  t.equal(declared.responses[0]?.status, 200);
  t.equal(last(b).method, 'HEAD', 'a declared HEAD goes upstream as HEAD');
});

t.test('equivalent endpoints on two hosts are balanced', async (t) => {
  const beforeA = a.requests.length;
  const beforeB = b.requests.length;
  for (let i = 0; i < 10; i++) t.equal((await get('/both')).status, 200);
  t.equal(a.requests.length - beforeA, 5);
  t.equal(b.requests.length - beforeB, 5);
});

t.test('built-in endpoints win over upstream routes', async (t) => {
  const before = a.requests.length;
  const res = await get('/healthcheck');
  t.equal(res.status, 200);
  t.equal(res.text, '{"builtin":true}');
  t.equal(a.requests.length, before, 'the upstream declaring /healthcheck is not asked');
});

t.test('upstream statuses pass through unchanged', async (t) => {
  a.setHandler((req, res) => {
    res.statusCode = 404;
    res.setHeader('content-type', 'text/plain');
    res.end('upstream says no');
  });
  t.teardown(() => a.setHandler(echoHandler));
  const res = await get('/users/404');
  t.equal(res.status, 404);
  t.equal(res.headers['content-type'], 'text/plain');
  t.equal(res.text, 'upstream says no');
});

t.test('listeners are told of each request once', async (t) => {
  done.length = 0;
  await get('/listeners?x=1', { 'x-forwarded-for': '198.51.100.1' });
  await get('/nowhere');
  t.equal(done.length, 2);
  const proxied = done[0]!;
  const rejected = done[1]!;
  t.match(proxied, {
    method: 'GET',
    path: '/listeners',
    routeTemplate: '/listeners',
    upstream: a.url,
    status: 200,
    bytesIn: 0,
    clientAddress: '127.0.0.1',
    disabledListeners: ['accessLog'],
  });
  t.ok(proxied.routeId >= 0);
  t.ok(proxied.bytesOut > 0);
  t.ok(proxied.latencyMs >= 0 && proxied.latencyMs < 5000);
  t.ok(Math.abs(proxied.startedAt - Date.now()) < 5000, 'startedAt is epoch ms');
  t.match(rejected, { path: '/nowhere', routeTemplate: null, routeId: -1, upstream: null, status: 404 });
  t.equal(plane.inFlight(), 0);
});

t.test('trustedProxies: the client address and X-Forwarded-Proto/-Host come from the trusted proxy', async (t) => {
  const seen: string[] = [];
  const trusting = await startDataPlane({
    config: testConfig({ trustedProxies: ['127.0.0.1'] }),
    listeners: [{ id: 'seen', done: (ctx) => void seen.push(ctx.clientAddress) }],
  });
  t.teardown(() => trusting.close());
  trusting.setTable(RoutingTable.compile([entry('GET', '/users/{id}', a.url)]).table);
  const res = await rawRequest(
    trusting.port,
    'GET /users/1 HTTP/1.1\r\nHost: internal\r\nX-Forwarded-For: 192.0.2.1, 198.51.100.7\r\n' +
      'X-Forwarded-Proto: https\r\nX-Forwarded-Host: api.example.com\r\n\r\n',
    { responses: 1 },
  );
  t.equal(res.responses[0]?.status, 200);
  t.same(seen, ['198.51.100.7'], 'the rightmost hop that is not a trusted proxy');
  t.equal(last(a).headers['x-forwarded-for'], '192.0.2.1, 198.51.100.7, 127.0.0.1');
  t.equal(last(a).headers['x-forwarded-proto'], 'https');
  t.equal(last(a).headers['x-forwarded-host'], 'api.example.com');
});
