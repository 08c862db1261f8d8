// The upstream's 101 headers through the running cluster: its end-to-end headers (Set-Cookie, its own)
// reach the client's 101; hop-by-hop ones, Date, Via and the handshake headers the client's leg
// negotiates itself do not come twice or from the upstream. And on the uWS build itself: headers
// written between our own 101 status line and upgrade() reach the client, and a WebSocket has no
// pause()/resume() (why client-to-upstream backpressure closes with 1013: native-notes.md).
import type { IncomingMessage } from 'node:http';
import t from 'tap';
import { WebSocket } from 'ws';
import { loadUws } from '../../src/native/uws.js';
import type { UwsListenSocket } from '../../src/native/uws-types.js';
import { startGateway, testConfig } from '../helpers/gateway-process.js';
import { nextMessage, startWsUpstream, wsUpstreamConfig } from '../helpers/ws-upstream.js';

/** Opens a client and resolves with it and its 101's raw headers (names lower-cased). */
function openWithHead(url: string, protocols: string[] = []): Promise<{ socket: WebSocket; head: Array<[string, string]> }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, protocols);
    let head: Array<[string, string]> = [];
    socket.once('upgrade', (res: IncomingMessage) => {
      head = [];
      for (let i = 0; i < res.rawHeaders.length; i += 2) head.push([res.rawHeaders[i]!.toLowerCase(), res.rawHeaders[i + 1]!]);
    });
    socket.once('open', () => resolve({ socket, head }));
    socket.once('error', reject);
  });
}

const valuesOf = (head: Array<[string, string]>, name: string): string[] => head.filter(([n]) => n === name).map(([, v]) => v);

t.test("the upstream's end-to-end 101 headers reach the client's 101", async (t) => {
  const upstream = await startWsUpstream(t, { handleProtocols: (offered) => (offered.has('chat.v2') ? 'chat.v2' : false) });
  upstream.wss.on('headers', (headers) => {
    headers.push(
      'Set-Cookie: session=abc; Path=/; HttpOnly',
      'Set-Cookie: theme=dark',
      'X-Upstream-Node: u1',
      'Cache-Control: no-store',
      'Keep-Alive: timeout=5',
      'Connection: X-Hop',
      'X-Hop: secret',
      'Proxy-Authenticate: Basic',
      'Via: 1.1 inner',
      'Date: Mon, 01 Jan 2001 00:00:00 GMT',
    );
  });
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/room'])]),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const { socket, head } = await openWithHead(`ws://127.0.0.1:${gateway.port}/room`, ['chat.v1', 'chat.v2']);
  t.teardown(() => socket.terminate());
  t.same(valuesOf(head, 'set-cookie'), ['session=abc; Path=/; HttpOnly', 'theme=dark'], 'both cookies, in order');
  t.same(valuesOf(head, 'x-upstream-node'), ['u1']);
  t.same(valuesOf(head, 'cache-control'), ['no-store']);
  for (const name of ['keep-alive', 'x-hop', 'proxy-authenticate']) t.same(valuesOf(head, name), [], `${name} is hop-by-hop`);
  t.same(valuesOf(head, 'connection'), ['Upgrade'], "one Connection, uWS's");
  t.same(valuesOf(head, 'upgrade'), ['websocket']);
  t.equal(valuesOf(head, 'sec-websocket-accept').length, 1, 'one Sec-WebSocket-Accept, for the key the client sent');
  t.same(valuesOf(head, 'sec-websocket-protocol'), ['chat.v2'], 'the subprotocol the upstream chose, once');
  t.equal(valuesOf(head, 'date').length, 1, 'one Date');
  t.not(valuesOf(head, 'date')[0], 'Mon, 01 Jan 2001 00:00:00 GMT', "uWS's Date, not the upstream's");
  t.same(valuesOf(head, 'via'), ['1.1 specgate'], "the gateway's Via");
  t.equal(socket.protocol, 'chat.v2');
  socket.send('still relays');
  t.equal((await nextMessage(socket)).data.toString(), 'still relays', 'the connection works after the longer head');
});

t.test('an upstream 101 with a large head (14 KiB of cookies) still upgrades the client', async (t) => {
  const upstream = await startWsUpstream(t);
  const cookies = Array.from({ length: 14 }, (_, i) => `c${i}=${'v'.repeat(1000)}`);
  upstream.wss.on('headers', (headers) => {
    for (const cookie of cookies) headers.push(`Set-Cookie: ${cookie}`);
  });
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/big'])]),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const { socket, head } = await openWithHead(`ws://127.0.0.1:${gateway.port}/big`);
  t.teardown(() => socket.terminate());
  t.same(valuesOf(head, 'set-cookie'), cookies);
  socket.send(Buffer.alloc(100_000, 7));
  const echo = await nextMessage(socket);
  t.equal(echo.data.length, 100_000);
});

t.test("one X-Request-Id, the gateway's (the one the upstream got), on the client's 101 and on an upstream's refusal", async (t) => {
  const refusedIds: Array<string | undefined> = [];
  const upstream = await startWsUpstream(t, {
    refuse: (req) => {
      if (!req.url?.startsWith('/private')) return null;
      refusedIds.push(req.headers['x-request-id'] as string | undefined);
      return [403, { 'content-type': 'text/plain', 'x-request-id': 'upstream-made' }, 'no'];
    },
  });
  upstream.wss.on('headers', (headers) => headers.push('X-Request-Id: upstream-made'));
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/room', '/private'])]),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const { socket, head } = await openWithHead(`ws://127.0.0.1:${gateway.port}/room`);
  t.teardown(() => socket.terminate());
  const sent = upstream.handshakes.at(-1)?.headers['x-request-id'];
  t.type(sent, 'string', 'the upstream got a request ID');
  t.match(upstream.handshakes.at(-1)?.headers.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/, 'and a traceparent');
  t.same(valuesOf(head, 'x-request-id'), [sent], "the 101 carries the gateway's ID once, not the upstream's");

  const refused = await new Promise<Array<[string, string]>>((resolve, reject) => {
    const client = new WebSocket(`ws://127.0.0.1:${gateway.port}/private`);
    client.once('unexpected-response', (_req, res: IncomingMessage) => {
      const pairs: Array<[string, string]> = [];
      for (let i = 0; i < res.rawHeaders.length; i += 2) pairs.push([res.rawHeaders[i]!.toLowerCase(), res.rawHeaders[i + 1]!]);
      t.equal(res.statusCode, 403, "the upstream's refusal is passed on");
      res.resume();
      client.terminate();
      resolve(pairs);
    });
    client.once('open', () => reject(new Error('upgraded')));
    client.on('error', () => {});
  });
  t.equal(refusedIds.length, 1);
  t.same(valuesOf(refused, 'x-request-id'), [refusedIds[0]], "the refusal carries the gateway's ID once, not the upstream's");
});

t.test('this uWS build: headers before upgrade() reach the 101; a WebSocket has no pause()/resume()', async (t) => {
  const { uws } = loadUws();
  const app = uws.App();
  const methods: string[] = [];
  app.ws('/*', {
    upgrade: (res, req, context) => {
      const key = req.getHeader('sec-websocket-key');
      const extensions = req.getHeader('sec-websocket-extensions');
      res.onAborted(() => {});
      // Later, as the gateway does it (after the upstream answered), in a cork of its own.
      setTimeout(() => {
        res.cork(() => {
          res.writeStatus('101 Switching Protocols');
          res.writeHeader('set-cookie', 'a=1');
          res.writeHeader('x-early', 'yes');
          res.upgrade({}, key, '', extensions, context);
        });
      }, 10);
    },
    open: (ws) => {
      for (let proto = Object.getPrototypeOf(ws); proto !== null && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
        methods.push(...Object.getOwnPropertyNames(proto));
      }
    },
    message: (ws, message, isBinary) => void ws.send(message, isBinary),
  });
  const token = await new Promise<UwsListenSocket | false>((resolve) => app.listen('127.0.0.1', 0, resolve));
  if (token === false) return t.fail('listen');
  t.teardown(() => uws.us_listen_socket_close(token));
  const port = uws.us_socket_local_port(token);
  const { socket, head } = await openWithHead(`ws://127.0.0.1:${port}/`);
  t.teardown(() => socket.terminate());
  t.same(valuesOf(head, 'set-cookie'), ['a=1']);
  t.same(valuesOf(head, 'x-early'), ['yes']);
  t.equal(valuesOf(head, 'sec-websocket-accept').length, 1);
  t.ok(methods.includes('send') && methods.includes('getBufferedAmount'), 'the WebSocket methods were read');
  t.notOk(methods.includes('pause'), 'no pause() on a uWS WebSocket');
  t.notOk(methods.includes('resume'), 'no resume() on a uWS WebSocket');
  t.comment(`WebSocket methods: ${methods.join(', ')}`);
});
