// docs/reference/respond.md#closing-the-connection: an answer that closes the connection while the client is
// still sending its body (413, 404, an early refusal) does not reset the connection under the client: the
// rest of the body is read and dropped, and the connection closed once the body has ended or the client
// has gone quiet. A reset would lose the answer for a client that writes its whole body before reading
// (as nginx does in front of the gateway): the write fails with EPIPE or ECONNRESET.
import net from 'node:net';
import t from 'tap';
import { startDataPlane } from '../../src/proxy/data-plane.js';
import { RoutingTable } from '../../src/routing/table.js';
import { LINGER_IDLE_MS } from '../../src/lifecycle/uws/closing-reply.js';
import { parseResponses } from '../helpers/raw-http.js';
import { entry, startUpstream, testConfig } from '../helpers/upstream-server.js';

const MAX_BODY_BYTES = 64 * 1024;
const upstream = await startUpstream();
const plane = await startDataPlane({
  config: testConfig({ limits: { maxBodyBytes: MAX_BODY_BYTES }, upstreams: [{ serviceType: 'static', serviceLocation: upstream.url, weight: 1, specPath: '/spec' }] }),
});
plane.setTable(RoutingTable.compile([entry('POST', '/upload', upstream.url), entry('GET', '/items/{id}', upstream.url)]).table);
t.teardown(async () => {
  await plane.close();
  await upstream.close();
});

interface Outcome {
  writeError: string | null;
  status: number;
  closedMs: number;
}

/**
 * Writes the head and `bodyBytes` of body (in 64 KiB pieces, waiting for drain) without reading, as
 * nginx does; then reads. `stopAfter`: bytes of body after which the client stops sending and waits.
 */
function writeThenRead(head: string, bodyBytes: number, stopAfter = bodyBytes, tail = ''): Promise<Outcome> {
  return new Promise((resolve) => {
    const socket = net.connect(plane.port, '127.0.0.1');
    socket.pause();
    const chunks: Buffer[] = [];
    let writeError: string | null = null;
    let wroteAt = 0;
    socket.on('error', (err: NodeJS.ErrnoException) => {
      writeError ??= err.code ?? String(err);
    });
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('close', () => {
      const responses = parseResponses(Buffer.concat(chunks));
      resolve({ writeError, status: responses[0]?.status ?? 0, closedMs: Date.now() - wroteAt });
    });
    const piece = Buffer.alloc(64 * 1024, 'b');
    let sent = 0;
    const pump = (): void => {
      while (sent < stopAfter && !socket.destroyed) {
        const n = Math.min(piece.length, stopAfter - sent);
        sent += n;
        if (!socket.write(n === piece.length ? piece : piece.subarray(0, n))) {
          socket.once('drain', pump);
          return;
        }
      }
      if (sent === bodyBytes && tail !== '') socket.write(tail);
      // Everything written: only now read, as nginx does.
      wroteAt = Date.now();
      socket.resume();
    };
    socket.on('connect', () => {
      socket.write(head);
      pump();
    });
  });
}

t.test('a large body to a path with no endpoint: the whole body is written, then the 404 read', async (t) => {
  for (let i = 0; i < 3; i++) {
    const outcome = await writeThenRead(`POST /nowhere HTTP/1.1\r\nHost: gw\r\nContent-Length: ${8 * 1024 * 1024}\r\n\r\n`, 8 * 1024 * 1024);
    t.equal(outcome.writeError, null, `try ${i + 1}: no reset while writing`);
    t.equal(outcome.status, 404, `try ${i + 1}: the answer arrived`);
    t.ok(outcome.closedMs < LINGER_IDLE_MS, `try ${i + 1}: closed once the body had ended (${outcome.closedMs} ms after)`);
  }
});

t.test('a body over limits.maxBodyBytes, declared and chunked: 413 arrives, no reset', async (t) => {
  const declared = await writeThenRead(`POST /upload HTTP/1.1\r\nHost: gw\r\nContent-Length: ${8 * 1024 * 1024}\r\n\r\n`, 8 * 1024 * 1024);
  t.equal(declared.writeError, null);
  t.equal(declared.status, 413);
  // Counted while streaming: the 413 comes mid-body, after some of it went upstream.
  const size = 4 * 1024 * 1024;
  const chunked = await writeThenRead(`POST /upload HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n${size.toString(16)}\r\n`, size, size, '\r\n0\r\n\r\n');
  t.equal(chunked.writeError, null);
  t.equal(chunked.status, 413);
});

t.test('a client that stops sending after the answer is closed once it has been quiet a while', async (t) => {
  const outcome = await writeThenRead(`POST /nowhere HTTP/1.1\r\nHost: gw\r\nContent-Length: ${1024 * 1024}\r\n\r\n`, 1024 * 1024, 100 * 1024);
  t.equal(outcome.status, 404);
  t.ok(outcome.closedMs >= LINGER_IDLE_MS - 100 && outcome.closedMs < LINGER_IDLE_MS + 5000, `closed ${outcome.closedMs} ms after the client went quiet`);
});

t.test('the data plane still serves', async (t) => {
  const response = await fetch(`http://127.0.0.1:${plane.port}/items/1`);
  t.equal(response.status, 200);
  await response.text();
});
