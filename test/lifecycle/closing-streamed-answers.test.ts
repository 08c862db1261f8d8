/*
 * A proxied answer after which the connection must close, too large for one end() (a streamed body):
 * uWS 20.30 ends such a response and reads on, so a "request" that follows on the connection (a
 * chunked body's trailer section, which this uWS reads as a request) reached the upstream and was
 * answered. Such answers are now sent chunked and never ended (their last chunk written by hand),
 * so uWS closes the connection when anything follows, and the gateway closes it once idle.
 * See src/lifecycle/uws/closing-reply.ts and native-notes.md ("What follows a closing answer").
 */
import http from 'node:http';
import { createHash } from 'node:crypto';
import t from 'tap';
import { startDataPlane } from '../../src/proxy/data-plane.js';
import { RoutingTable } from '../../src/routing/table.js';
import { IDLE_CLOSE_MS } from '../../src/lifecycle/uws/closing-reply.js';
import { rawRequest } from '../helpers/raw-http.js';
import { entry, startUpstream, testConfig } from '../helpers/upstream-server.js';

const SIZE = 300_000;
const payload = Buffer.alloc(SIZE);
for (let i = 0; i < SIZE; i++) payload[i] = (i * 7 + (i >> 8)) & 0xff;
const digest = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

const upstream = await startUpstream((req, res) => {
  req.resume();
  req.on('end', () => {
    if (req.url?.startsWith('/sized')) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(SIZE) });
      res.end(payload);
    } else if (req.url?.startsWith('/stream')) {
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      let at = 0;
      const next = (): void => {
        if (at >= SIZE) return void res.end();
        res.write(payload.subarray(at, at + 50_000));
        at += 50_000;
        setTimeout(next, 5);
      };
      next();
    } else if (req.url?.startsWith('/split')) {
      // Head and body in two writes: the gateway reads the head alone, and writes it ahead of the body.
      // /split-big: a head larger than one cork (written to uWS in pieces as it comes).
      const big = req.url.startsWith('/split-big') ? { 'x-big': 'b'.repeat(16_150) } : {};
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '9', ...big });
      res.flushHeaders();
      setTimeout(() => res.end('split-ok!'), 20);
    } else if (req.url?.startsWith('/empty')) {
      res.writeHead(200, { 'content-length': '0' });
      res.end();
    } else if (req.url?.startsWith('/short')) {
      // Declares more than it sends, then goes away: must not look whole to the client.
      res.writeHead(200, { 'content-length': String(SIZE) });
      res.write(payload.subarray(0, 1000));
      setTimeout(() => res.socket?.destroy(), 50);
    } else {
      res.end('ok');
    }
  });
});
const config = testConfig({ upstreams: [{ serviceType: 'static', serviceLocation: upstream.url, weight: 1, specPath: '/spec' }] });
// A built-in answer larger than one cork (as /spec of many upstreams is): a local reply that must close.
const BIG_LOCAL = JSON.stringify({ items: Array.from({ length: 5000 }, (_, i) => ({ id: i, name: `item ${i}` })) });
const plane = await startDataPlane({
  config,
  builtins: (method, path) => (path === '/big-local' ? { status: 200, headers: { 'content-type': 'application/json' }, body: BIG_LOCAL } : null),
});
const { table } = RoutingTable.compile(
  ['/sized', '/stream', '/split', '/split-big', '/empty', '/short'].flatMap((path) => [entry('POST', path, upstream.url), entry('GET', path, upstream.url)]).concat(entry('GET', '/ok/{x}', upstream.url)),
);
plane.setTable(table);
t.teardown(async () => {
  await plane.close();
  await upstream.close();
});

const smuggled = (n: number): string => `X:GET /ok/smuggled-${n} HTTP/1.1\r\nHost: gw\r\n\r\n`;
const chunkedPost = (path: string): string => `POST ${path} HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n`;

t.test('a streamed answer to a chunked request: whole, then what follows the body is never forwarded nor answered', async (t) => {
  let n = 0;
  for (const path of ['/sized', '/stream']) {
    n++;
    // The trailer section arrives after the answer was sent: uWS reads it as a request.
    const result = await rawRequest(plane.port, [chunkedPost(path), smuggled(n)], { waitMs: 5000, partDelayMs: 800 });
    t.equal(result.responses.length, 1, `${path}: one answer`);
    const answer = result.responses[0]!;
    t.equal(answer.status, 200);
    t.ok(answer.complete, `${path}: the answer is whole`);
    t.equal(digest(answer.body), digest(payload), `${path}: every byte, in order`);
    t.same(answer.headers.connection, ['close'], `${path}: it says the connection closes`);
    t.same(answer.headers['transfer-encoding'], ['chunked'], `${path}: sent chunked (the upstream's length is not kept)`);
    t.ok(result.closedByServer && !result.timedOut, `${path}: the connection closed at what followed`);
    t.notOk(upstream.requests.some((seen) => seen.url.startsWith('/ok/smuggled')), `${path}: nothing that followed was forwarded`);
  }
});

t.test("a client that sent 'Connection: x-trace, close' (which uWS does not act on) gets the same", async (t) => {
  const result = await rawRequest(
    plane.port,
    ['GET /stream HTTP/1.1\r\nHost: gw\r\nConnection: x-trace, close\r\n\r\n', 'GET /ok/smuggled-9 HTTP/1.1\r\nHost: gw\r\n\r\n'],
    { waitMs: 5000, partDelayMs: 800 },
  );
  t.equal(result.responses.length, 1);
  t.equal(digest(result.responses[0]!.body), digest(payload));
  t.ok(result.closedByServer && !result.timedOut);
  t.notOk(upstream.requests.some((seen) => seen.url === '/ok/smuggled-9'));
});

t.test('a sized head read before its body, on an answer that must close: one framing, the body whole', async (t) => {
  const requests = [
    'GET /split HTTP/1.1\r\nHost: gw\r\nConnection: x-trace, close\r\n\r\n',
    'GET /split HTTP/1.1\r\nHost: gw\r\nConnection: keep-alive, close\r\n\r\n',
    chunkedPost('/split') + '\r\n',
    'GET /split-big HTTP/1.1\r\nHost: gw\r\nConnection: x-trace, close\r\n\r\n',
  ];
  for (const request of requests) {
    const result = await rawRequest(plane.port, [request], { waitMs: 3000, responses: 1 });
    const label = JSON.stringify(request.split('\r\n').slice(0, 3).join(' '));
    t.equal(result.responses.length, 1, `${label}: one answer`);
    const answer = result.responses[0]!;
    t.equal(answer.status, 200);
    t.ok(answer.complete, `${label}: whole`);
    t.equal(answer.body.toString(), 'split-ok!', `${label}: the upstream's body, nothing else`);
    t.same(answer.headers['content-length'], undefined, `${label}: no Content-Length beside the chunked framing`);
    t.same(answer.headers['transfer-encoding'], ['chunked']);
    t.same(answer.headers.connection, ['close']);
    if (request.includes('/split-big')) t.equal(answer.headers['x-big']?.[0]?.length, 16_150, `${label}: the large header whole`);
  }
  // Node's client (llhttp) refuses a misframed answer outright.
  const body = await new Promise<string>((resolve, reject) => {
    const req = http.get({ port: plane.port, host: '127.0.0.1', path: '/split', headers: { connection: 'keep-alive, close' }, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve(text));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
  t.equal(body, 'split-ok!', "Node's client reads it whole");
});

t.test('a local answer larger than one cork that must close: whole, and what follows is never read', async (t) => {
  t.ok(BIG_LOCAL.length > 64 * 1024);
  for (const [name, parts] of [
    ['a chunked request', [chunkedPost('/big-local'), smuggled(20)]],
    ["'Connection: x-trace, close'", ['GET /big-local HTTP/1.1\r\nHost: gw\r\nConnection: x-trace, close\r\n\r\n', 'GET /ok/smuggled-21 HTTP/1.1\r\nHost: gw\r\n\r\n']],
  ] as const) {
    const result = await rawRequest(plane.port, parts, { waitMs: 5000, partDelayMs: 800 });
    t.equal(result.responses.length, 1, `${name}: one answer`);
    t.ok(result.responses[0]?.complete, `${name}: whole`);
    t.equal(result.responses[0]?.body.toString(), BIG_LOCAL, `${name}: every byte`);
    t.same(result.responses[0]?.headers.connection, ['close'], `${name}: it says close`);
    t.equal(result.responses[0]?.headers.date?.length, 1, `${name}: one Date`);
    t.ok(result.closedByServer && !result.timedOut, `${name}: closed at what followed`);
    t.notOk(upstream.requests.some((seen) => seen.url.startsWith('/ok/smuggled-2')), `${name}: nothing that followed was forwarded`);
  }
});

t.test("Node's HTTP client (llhttp) reads such an answer whole", async (t) => {
  const body = await new Promise<Buffer>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: plane.port, method: 'POST', path: '/stream', headers: { 'transfer-encoding': 'chunked' } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (part: Buffer) => parts.push(part));
      res.on('end', () => resolve(Buffer.concat(parts)));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end('hello');
  });
  t.equal(digest(body), digest(payload));
});

t.test('an empty body ended by hand has Content-Length: 0; a short one is cut, not terminated', async (t) => {
  const empty = await rawRequest(plane.port, [chunkedPost('/empty'), '\r\n'], { waitMs: 3000, responses: 1 });
  t.equal(empty.responses[0]?.status, 200);
  t.same(empty.responses[0]?.headers['content-length'], ['0']);
  t.equal(empty.responses[0]?.headers.date?.length, 1, 'one Date');

  const short = await rawRequest(plane.port, [chunkedPost('/short'), '\r\n'], { waitMs: 5000 });
  t.equal(short.responses[0]?.status, 200);
  t.notOk(short.responses[0]?.complete, 'the client can tell the answer was cut');
  t.ok(short.closedByServer);
});

t.test('a client that keeps such a connection open, silent, is closed once it has been idle', async (t) => {
  const result = await rawRequest(plane.port, [chunkedPost('/stream'), '\r\n'], { waitMs: IDLE_CLOSE_MS + 6000 });
  t.equal(digest(result.responses[0]!.body), digest(payload));
  t.ok(result.closedByServer && !result.timedOut, 'closed by the gateway');
  t.ok(result.elapsedMs >= IDLE_CLOSE_MS - 500, `not before it was idle (${result.elapsedMs} ms)`);
});

t.test('a keep-alive connection is not affected: sized answers keep their length, and the connection stays open', async (t) => {
  const result = await rawRequest(plane.port, ['GET /sized HTTP/1.1\r\nHost: gw\r\n\r\n', 'GET /ok/after HTTP/1.1\r\nHost: gw\r\n\r\n'], { responses: 2, waitMs: 5000, partDelayMs: 500 });
  t.same(result.responses.map((r) => r.status), [200, 200]);
  t.same(result.responses[0]?.headers['content-length'], [String(SIZE)]);
  t.notOk(result.closedByServer);
});

t.test('nothing is left in flight', async (t) => {
  t.equal(plane.inFlight(), 0);
});
