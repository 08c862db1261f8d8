// The upstream leg after a clean close handshake (src/websocket/upstream-socket.ts): the gateway ends
// its side of the TCP connection and, should the upstream never close its own, lets go of the socket
// after the close timeout (RFC 6455 7.1.1), as it does after a protocol violation. Before, a socket
// whose upstream answered the close frame but kept TCP open stayed in the worker (FIN-WAIT-2) for good.
// A raw TCP upstream that never ends its side: once the gateway has let go, its writes are refused.
import { createHash } from 'node:crypto';
import net from 'node:net';
import t, { type Test } from 'tap';
import { UpstreamSocket, type UpstreamMessageHandler } from '../../src/websocket/upstream-socket.js';

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';

/** An upstream that completes the handshake, sends a close frame (1000 "bye") and never closes TCP. */
async function halfOpenUpstream(t: Test): Promise<{ port: number; accepted: Promise<net.Socket> }> {
  let accept!: (socket: net.Socket) => void;
  const accepted = new Promise<net.Socket>((resolve) => (accept = resolve));
  // allowHalfOpen: Node would otherwise end the upstream's side as soon as the gateway's FIN arrives.
  const server = net.createServer({ allowHalfOpen: true }, (socket) => {
    let head = '';
    socket.on('error', () => {});
    socket.on('data', (chunk) => {
      if (head.includes('\r\n\r\n')) return;
      head += chunk.toString('latin1');
      if (!head.includes('\r\n\r\n')) return;
      const key = /sec-websocket-key: *(\S+)/i.exec(head)![1]!;
      const digest = createHash('sha1').update(key + GUID).digest('base64');
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${digest}\r\n\r\n`);
      socket.write(Buffer.from([0x88, 0x05, 0x03, 0xe8, 0x62, 0x79, 0x65]));
      accept(socket);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => server.close());
  return { port: (server.address() as net.AddressInfo).port, accepted };
}

/** Writes a byte every 50 ms until the peer refuses one (its socket is gone: RST); ms until then, or -1 after `limitMs`. */
function refusedAfter(socket: net.Socket, limitMs: number): Promise<number> {
  const started = Date.now();
  return new Promise((resolve) => {
    const timer = setInterval(() => {
      if (Date.now() - started > limitMs) {
        clearInterval(timer);
        resolve(-1);
      } else socket.write('x');
    }, 50);
    socket.on('error', () => {
      clearInterval(timer);
      resolve(Date.now() - started);
    });
    socket.on('close', () => {
      clearInterval(timer);
      resolve(Date.now() - started);
    });
  });
}

t.test('after the upstream close frame, a socket the upstream keeps open is let go after closeTimeoutMs', async (t) => {
  const { port, accepted } = await halfOpenUpstream(t);
  const closed: Array<[number, string]> = [];
  const handler: UpstreamMessageHandler = {
    onMessage: () => {},
    onReadEnd: () => {},
    onControlFrame: () => {},
    onClosed: (code, reason) => closed.push([code, reason]),
  };
  const opened = new Promise<UpstreamSocket>((resolve, reject) => {
    new UpstreamSocket(
      { origin: `http://127.0.0.1:${port}`, target: '/', headers: [], protocols: [], maxPayload: 65536, connectTimeoutMs: 2000, handshakeTimeoutMs: 2000, maxResponseHeaderBytes: 16384, closeTimeoutMs: 300 },
      {
        onOpen: (socket) => {
          socket.attach(handler);
          resolve(socket);
        },
        onRefused: (status) => reject(new Error(`refused ${status}`)),
        onFailed: (kind, detail) => reject(new Error(`${kind}: ${detail}`)),
      },
    );
  });
  await opened;
  const upstream = await accepted;
  const ended = new Promise<void>((resolve) => upstream.once('end', resolve));
  await ended;
  t.same(closed, [[1000, 'bye']], 'the close frame is reported once');
  const ms = await refusedAfter(upstream, 3000);
  t.ok(ms >= 0, `the gateway let go of the socket (the upstream's write refused after ${ms} ms)`);
  upstream.destroy();
});
