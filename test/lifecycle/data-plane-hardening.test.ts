// Hardening (docs/reference/respond.md#upstream-answers, docs/reference/accept.md#head-checks), against a real data plane and real sockets: response framing whatever the
// header count, every Connection header honoured, ambiguous request heads refused, forwarded-header
// trust, encoded slashes.
import http from 'node:http';
import t from 'tap';
import { startDataPlane, type DataPlane } from '../../src/proxy/data-plane.js';
import { recordInto, type FinishedInfo } from '../helpers/finished.js';
import { RoutingTable } from '../../src/routing/table.js';
import type { GatewayConfig } from '../../src/config/types.js';
import type { Teardown } from '../helpers/gateway-process.js';
import { rawRequest } from '../helpers/raw-http.js';
import { fillers, rawResponse, startRawServer, startRawUpstream } from '../helpers/raw-upstream.js';
import { echoHandler, entry, startUpstream, testConfig, type ConfigOverrides } from '../helpers/upstream-server.js';

const echo = await startUpstream();
t.teardown(() => echo.close());

async function planeFor(t: Teardown, upstream: string, overrides: ConfigOverrides = {}, done?: FinishedInfo[]): Promise<DataPlane> {
  const config: GatewayConfig = testConfig({
    ...overrides,
    upstreams: [{ serviceType: 'static', serviceLocation: upstream, weight: 1, specPath: '/spec' }],
  });
  const plane = await startDataPlane({ config, listeners: done ? [recordInto(done)] : [] });
  plane.setTable(RoutingTable.compile([entry('GET', '/users/{id}', upstream), entry('POST', '/users', upstream), entry('GET', '/files/{+path}', upstream)]).table);
  t.teardown(() => plane.close());
  return plane;
}

/** Node's own HTTP client: llhttp refuses duplicate Content-Length, CL with TE, and the like. */
function strictGet(port: number, path: string, headers: Record<string, string> = {}): Promise<{ status: number; raw: string[]; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('latin1');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, raw: res.rawHeaders, body }));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

function namesOf(raw: string[]): string[] {
  return raw.filter((_, i) => i % 2 === 0).map((name) => name.toLowerCase());
}

function count(names: string[], name: string): number {
  return names.filter((n) => n === name).length;
}

t.test('an answer with 34 headers, Transfer-Encoding third: one framing header, no hop-by-hop', async (t) => {
  const body = '5\r\nhello\r\n0\r\n\r\n';
  const upstream = await startRawUpstream(() =>
    rawResponse(
      '200 OK',
      [
        ['Date', 'Mon, 23 Nov 2026 09:00:00 GMT'],
        ['Server', 'nginx'],
        ['Transfer-Encoding', 'chunked'],
        ['Connection', 'keep-alive'],
        ['Keep-Alive', 'timeout=5'],
        ['Proxy-Connection', 'keep-alive'],
        ...fillers(28),
      ],
      body,
    ),
  );
  t.teardown(() => upstream.close());
  const plane = await planeFor(t, upstream.url);
  const res = await strictGet(plane.port, '/users/1');
  t.equal(res.status, 200);
  t.equal(res.body, 'hello');
  const names = namesOf(res.raw);
  t.equal(count(names, 'transfer-encoding') + count(names, 'content-length'), 1, 'exactly one framing header');
  t.equal(count(names, 'date'), 1, 'one Date');
  for (const hop of ['keep-alive', 'proxy-connection']) t.equal(count(names, hop), 0, `${hop} dropped`);
  t.equal(count(names, 'x-filler-28'), 1, 'end-to-end headers all pass');
  t.equal(count(names, 'server'), 1);
});

t.test('an answer with 34 headers, Content-Length first: one Content-Length reaches the client', async (t) => {
  const upstream = await startRawUpstream(() =>
    rawResponse('200 OK', [['Content-Length', '5'], ['Date', 'Mon, 23 Nov 2026 09:00:00 GMT'], ['Keep-Alive', 'timeout=5'], ...fillers(31)], 'hello'),
  );
  t.teardown(() => upstream.close());
  const plane = await planeFor(t, upstream.url);
  for (const path of ['/users/1', '/users/2']) {
    const res = await strictGet(plane.port, path);
    t.equal(res.status, 200);
    t.equal(res.body, 'hello');
    const names = namesOf(res.raw);
    t.equal(count(names, 'content-length'), 1, 'one Content-Length');
    t.equal(count(names, 'transfer-encoding'), 0);
    t.equal(count(names, 'keep-alive'), 0);
    t.equal(count(names, 'x-filler-31'), 1);
  }
  // HEAD keeps the upstream's length (no body to frame), still once.
  const head = await rawRequest(plane.port, 'HEAD /users/3 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1, head: true });
  t.same(head.responses[0]!.headers['content-length'], ['5'], 'HEAD: one Content-Length, the upstream\'s');
});

t.test('headers named by every one of several Connection headers are dropped', async (t) => {
  const upstream = await startRawUpstream(() =>
    rawResponse(
      '200 OK',
      [
        ['Connection', 'x-secret'],
        ['X-Secret', 'hunter2'],
        ['Connection', 'keep-alive'],
        ['Connection', 'keep-alive, X-Hop-Two'],
        ['X-Hop-Two', '2'],
        ['X-Other', 'kept'],
        ['Content-Length', '2'],
      ],
      'ok',
    ),
  );
  t.teardown(() => upstream.close());
  const plane = await planeFor(t, upstream.url);
  const res = await strictGet(plane.port, '/users/1');
  t.equal(res.status, 200);
  const names = namesOf(res.raw);
  t.equal(count(names, 'x-secret'), 0, 'x-secret, named by the first Connection header, is not forwarded');
  t.equal(count(names, 'x-hop-two'), 0, 'x-hop-two, named by the last one, is not forwarded');
  t.equal(count(names, 'x-other'), 1);
});

t.test('Connection: close from the client: every answer says close, and the connection ends after it (RFC 9112 9.6)', async (t) => {
  const plane = await planeFor(t, echo.url);
  const close = (line: string, connection = 'close'): string => `${line} HTTP/1.1\r\nHost: gw\r\nConnection: ${connection}\r\n\r\n`;
  const cases: Array<[string, string, number]> = [
    ['a proxied answer', close('GET /users/1'), 200],
    ['a proxied answer, "Close"', close('GET /users/1', 'Close'), 200],
    ['a HEAD of a proxied answer', close('HEAD /users/1'), 200],
    ['a problem+json answer', close('GET /nothing/here'), 404],
    ['a HEAD of a problem+json answer', close('HEAD /nothing/here'), 404],
    ['a problem+json answer, "close" among other options', close('GET /nothing/here', 'X-Trace, CLOSE'), 404],
    ['a 200 to an OPTIONS', close('OPTIONS /users/1'), 200],
  ];
  for (const [name, request, status] of cases) {
    const res = await rawRequest(plane.port, request, { waitMs: 3000, head: request.startsWith('HEAD') });
    t.equal(res.responses[0]?.status, status, `${name}: ${status}`);
    t.same(res.responses[0]?.headers.connection, ['close'], `${name}: one Connection: close`);
    t.ok(res.closedByServer && !res.timedOut, `${name}: the connection closed after it`);
  }
  const kept = await rawRequest(plane.port, 'GET /users/1 HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  t.equal(kept.responses[0]?.headers.connection, undefined, 'without it, no Connection header');
});

t.test('"close" among other Connection options: uWS does not close for it, a proxied answer in one piece closes all the same', async (t) => {
  // /users/1 a sized body, /users/2 an empty one, /users/3 a chunked body (streamed: ended by hand and
  // closed once idle, test/lifecycle/closing-streamed-answers.test.ts).
  const upstream = await startRawServer((socket, head) => {
    const target = head.split(' ')[1];
    if (target === '/users/3') socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n');
    else if (target === '/users/2') socket.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n');
    else socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok');
  });
  t.teardown(() => upstream.close());
  const plane = await planeFor(t, upstream.url);
  for (const [target, closes] of [['/users/1', true], ['/users/2', true], ['/users/3', false]] as const) {
    const request = `GET ${target} HTTP/1.1\r\nHost: gw\r\nConnection: X-Trace, close\r\n\r\n`;
    const res = await rawRequest(plane.port, request, closes ? { waitMs: 3000 } : { responses: 1 });
    t.equal(res.responses.length, 1, `${target}: one answer`);
    t.equal(res.responses[0]?.status, 200, `${target}: 200`);
    t.same(res.responses[0]?.headers.connection, ['close'], `${target}: the answer says close, once`);
    if (closes) t.ok(res.closedByServer && !res.timedOut, `${target}: the connection closed after it`);
  }
});

t.test('ambiguous request heads are 400 and nothing is forwarded', async (t) => {
  const plane = await planeFor(t, echo.url);
  const before = echo.requests.length;
  const cases: Array<[string, string]> = [
    ['two Host headers', 'GET /users/1 HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\n\r\n'],
    ['a Host with userinfo (RFC 9112 3.2: not a host)', 'GET /users/1 HTTP/1.1\r\nHost: user@evil.example\r\n\r\n'],
    ['a Host with a path', 'GET /users/1 HTTP/1.1\r\nHost: gw.example/other\r\n\r\n'],
    ['a Host with a non-numeric port', 'GET /users/1 HTTP/1.1\r\nHost: gw.example:http\r\n\r\n'],
    ['two different Content-Types', 'POST /users HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\n{}'],
  ];
  for (const [name, request] of cases) {
    const res = await rawRequest(plane.port, request, { responses: 1, waitMs: 2000 });
    t.equal(res.responses[0]?.status, 400, `${name}: 400`);
    t.same(res.responses[0]?.headers['content-type'], ['application/problem+json'], `${name}: problem+json`);
    t.match(JSON.parse(res.responses[0]!.body.toString()), { status: 400, detail: /Host|Content-Type/ });
  }
  t.equal(echo.requests.length, before, 'the upstream saw none of them');
  const same = await rawRequest(
    plane.port,
    'POST /users HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}',
    { responses: 1 },
  );
  t.equal(same.responses[0]?.status, 200, 'the same Content-Type twice is one Content-Type');
  t.same(echo.requests[echo.requests.length - 1]!.headers['content-type'], 'application/json', 'forwarded once');
});

t.test('untrusted peer: its X-Forwarded-*, Forwarded and X-Real-IP are replaced by the gateway\'s own', async (t) => {
  const done: FinishedInfo[] = [];
  const plane = await planeFor(t, echo.url, { trustedProxies: ['10.0.0.0/8'] }, done);
  const res = await rawRequest(
    plane.port,
    'GET /users/1 HTTP/1.1\r\nHost: gw.example\r\nX-Forwarded-For: 6.6.6.6\r\nX-Forwarded-Proto: https\r\n' +
      'X-Forwarded-Host: evil.example\r\nForwarded: for=6.6.6.6\r\nX-Real-IP: 6.6.6.6\r\n' +
      'X-Forwarded-Port: 443\r\nX-Forwarded-Prefix: /admin\r\nX-Forwarded-Ssl: on\r\nx-forwarded-server: evil\r\n\r\n',
    { responses: 1 },
  );
  t.equal(res.responses[0]?.status, 200);
  const seen = echo.requests[echo.requests.length - 1]!.headers;
  for (const name of ['x-forwarded-port', 'x-forwarded-prefix', 'x-forwarded-ssl', 'x-forwarded-server']) t.notOk(name in seen, `${name} dropped`);
  t.equal(seen['x-forwarded-for'], '127.0.0.1', 'the peer only');
  t.equal(seen['x-forwarded-proto'], 'http');
  t.equal(seen['x-forwarded-host'], 'gw.example', 'the Host the client sent');
  t.notOk('forwarded' in seen, 'Forwarded dropped');
  t.notOk('x-real-ip' in seen, 'X-Real-IP dropped');
  t.equal(done[0]!.clientAddress, '127.0.0.1', 'the client is the peer');
});

t.test('trusted peer: headers kept and extended, client = rightmost hop that is not a trusted proxy', async (t) => {
  const done: FinishedInfo[] = [];
  const plane = await planeFor(t, echo.url, { trustedProxies: ['127.0.0.0/8', '10.0.0.0/8'] }, done);
  const res = await rawRequest(
    plane.port,
    'GET /users/1 HTTP/1.1\r\nHost: internal\r\nX-Forwarded-For: 1.1.1.1, 203.0.113.7, 10.1.2.3\r\n' +
      'X-Forwarded-Proto: https\r\nX-Forwarded-Host: api.example.com\r\nForwarded: for=203.0.113.7\r\nX-Real-IP: 203.0.113.7\r\n' +
      'X-Forwarded-Port: 443\r\nX-Forwarded-Prefix: /api\r\n\r\n',
    { responses: 1 },
  );
  t.equal(res.responses[0]?.status, 200);
  const seen = echo.requests[echo.requests.length - 1]!.headers;
  t.equal(seen['x-forwarded-port'], '443', "a trusted proxy's X-Forwarded-Port is kept");
  t.equal(seen['x-forwarded-prefix'], '/api');
  t.equal(seen['x-forwarded-for'], '1.1.1.1, 203.0.113.7, 10.1.2.3, 127.0.0.1', 'extended with the peer');
  t.equal(seen['x-forwarded-proto'], 'https');
  t.equal(seen['x-forwarded-host'], 'api.example.com');
  t.equal(seen.forwarded, 'for=203.0.113.7, for=127.0.0.1', 'Forwarded extended');
  t.equal(seen['x-real-ip'], '203.0.113.7', 'X-Real-IP kept');
  t.equal(done[0]!.clientAddress, '203.0.113.7', '10.1.2.3 is a trusted proxy, 203.0.113.7 is not: the client; 1.1.1.1 is its claim');
});

t.test('encoded slashes: rejected by default, routed as one segment with "keep"', async (t) => {
  const rejecting = await planeFor(t, echo.url);
  const before = echo.requests.length;
  for (const path of ['/users/..%2F..%2Fadmin', '/users/a%2fb', '/users/a%5Cb', '/files/x%5cy']) {
    const res = await rawRequest(rejecting.port, `GET ${path} HTTP/1.1\r\nHost: gw\r\n\r\n`, { responses: 1 });
    t.equal(res.responses[0]?.status, 400, `${path}: 400`);
  }
  t.equal(echo.requests.length, before, 'nothing forwarded');
  const okay = await rawRequest(rejecting.port, 'GET /users/a%252Fb?q=%2F HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  t.equal(okay.responses[0]?.status, 200, 'an encoded "%" followed by 2F, and %2F in the query, are not slashes');

  const keeping = await planeFor(t, echo.url, { encodedSlashes: 'keep' });
  const kept = await rawRequest(keeping.port, 'GET /users/..%2F..%2Fadmin HTTP/1.1\r\nHost: gw\r\n\r\n', { responses: 1 });
  t.equal(kept.responses[0]?.status, 200);
  t.equal(echo.requests[echo.requests.length - 1]!.url, '/users/..%2F..%2Fadmin', 'forwarded as routed: one segment, still encoded');
});

echo.setHandler(echoHandler);

t.test('forwarding fields a trusted client names in Connection are dropped, not extended (RFC 9110 7.6.1)', async (t) => {
  const plane = await planeFor(t, echo.url, { trustedProxies: ['127.0.0.0/8'] });
  const res = await rawRequest(
    plane.port,
    'GET /users/1 HTTP/1.1\r\nHost: gw\r\nConnection: via, X-Forwarded-For, x-forwarded-port\r\nVia: 1.1 client-hop\r\n' +
      'X-Forwarded-For: 203.0.113.7\r\nX-Forwarded-Port: 8443\r\nX-Forwarded-Prefix: /kept\r\n\r\n',
    { responses: 1 },
  );
  t.equal(res.responses[0]?.status, 200);
  const seen = echo.requests[echo.requests.length - 1]!.headers;
  t.match(seen.via, /^1\.1 [^,]+$/, `only the gateway's own Via (${String(seen.via)})`);
  t.equal(seen['x-forwarded-for'], '127.0.0.1', 'X-Forwarded-For starts at the peer');
  t.notOk('x-forwarded-port' in seen, 'X-Forwarded-Port named in Connection is dropped');
  t.equal(seen['x-forwarded-prefix'], '/kept', 'one not named is kept');
});

t.test('trailing slashes: every one is dropped, so what is routed is what is forwarded', async (t) => {
  const plane = await planeFor(t, echo.url);
  for (const [sent, forwarded] of [
    ['/users/1/', '/users/1'],
    ['/users/1//', '/users/1'],
    ['/users/1/.//', '/users/1'],
    ['/files/a/b///', '/files/a/b'],
  ] as const) {
    const res = await rawRequest(plane.port, `GET ${sent} HTTP/1.1\r\nHost: gw\r\n\r\n`, { responses: 1 });
    t.equal(res.responses[0]?.status, 200, sent);
    t.equal(echo.requests[echo.requests.length - 1]!.url, forwarded, `${sent} goes upstream as ${forwarded}`);
  }
});
