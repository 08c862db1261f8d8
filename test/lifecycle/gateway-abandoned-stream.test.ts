/**
 * A streamed answer nobody reads any more, through the running gateway with one upstream connection
 * (docs/reference/forward.md#upstream-client): a client leaving an event stream, and a HEAD on an
 * event stream endpoint (sent upstream as GET), free the connection within the drain's deadline: the
 * upstream sees its stream's socket closed and the next request is answered at once. An answer
 * whose small rest follows its head at once is still read to the end and its connection reused.
 */
import net from 'node:net';
import type { ServerResponse } from 'node:http';
import t from 'tap';
import { DRAIN_MS } from '../../src/upstream/connection.js';
import { httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

/** Room for a busy machine (2 shared cores) on top of DRAIN_MS; still far below the silence timeout. */
const ROOM_MS = 600;

/** When each upstream event stream saw its socket close (performance.now()). */
const streamsClosed: number[] = [];
const upstreamSockets = new Set<number>();
const upstream = await startUpstream(t, {
  name: 'streams',
  handle(req, res) {
    upstreamSockets.add(req.socket.remotePort!);
    if (req.url === '/events') return eventStream(res);
    if (req.url === '/small') {
      // The head alone, its small rest right behind it in a second write.
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '2000' });
      res.flushHeaders();
      setImmediate(() => res.end('x'.repeat(2000)));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok');
  },
});

/** An endless event stream: an event every 50 ms, until the socket closes. */
function eventStream(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.write('data: 0\n\n');
  let n = 0;
  const tick = setInterval(() => res.write(`data: ${++n}\n\n`), 50);
  res.on('close', () => {
    clearInterval(tick);
    streamsClosed.push(performance.now());
  });
}

const endpoints = ['/events', '/small', '/next'].map((path) => ({ method: 'GET', path }));
const gateway = await startGateway(t, {
  config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints }], {
    upstreamPool: { connections: 1 },
    timeouts: { upstreamMs: 5000, connectMs: 1000, clientRequestMs: 10_000, shutdownGraceMs: 1000 },
  }),
  workers: 1,
  waitFor: (line) => line.msg === 'gateway operational',
});

/** GET /next on a fresh connection: its status and how long it took. */
async function next(): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  const { status } = await httpRequest(gateway.port, '/next');
  return { status, ms: performance.now() - started };
}

/** Waits (up to 10 s) for the upstream to see `count` event streams closed. */
async function streamClosed(count: number): Promise<number | undefined> {
  for (let i = 0; i < 1000 && streamsClosed.length < count; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  return streamsClosed[count - 1];
}

t.test('a client leaving an event stream: the upstream sees it closed within the deadline, the next request is answered at once', async (t) => {
  const client = net.connect(gateway.port, '127.0.0.1');
  client.write('GET /events HTTP/1.1\r\nHost: gw\r\n\r\n');
  // Wait for the head and a first event or two, then leave.
  await new Promise<void>((resolve) => {
    let seen = '';
    client.on('data', (chunk: Buffer) => {
      seen += chunk.toString('latin1');
      if (seen.includes('data: 1')) resolve();
    });
  });
  client.destroy();
  const leftAt = performance.now();
  const answer = await next();
  t.equal(answer.status, 200, 'the next request to that upstream is answered');
  t.ok(answer.ms < 1000, `within a second (${Math.round(answer.ms)} ms)`);
  const closedAt = await streamClosed(1);
  t.ok(closedAt !== undefined, 'the upstream saw its stream closed');
  const after = closedAt! - leftAt;
  t.ok(after < DRAIN_MS + ROOM_MS, `${Math.round(after)} ms after the client left (deadline ${DRAIN_MS} ms)`);
});

t.test('HEAD on an event stream endpoint: answered at once, and the stream it started upstream is closed within the deadline', async (t) => {
  const started = performance.now();
  const head = await httpRequest(gateway.port, '/events', { method: 'HEAD' });
  const answeredAt = performance.now();
  t.equal(head.status, 200);
  t.equal(head.headers['content-type'], 'text/event-stream');
  t.ok(answeredAt - started < 1000, 'the HEAD is answered at once');
  const answer = await next();
  t.equal(answer.status, 200, 'the next request to that upstream is answered');
  t.ok(answer.ms < 1000, `within a second (${Math.round(answer.ms)} ms)`);
  const closedAt = await streamClosed(2);
  t.ok(closedAt !== undefined, 'the upstream saw the stream closed');
  const after = closedAt! - answeredAt;
  t.ok(after < DRAIN_MS + ROOM_MS, `${Math.round(after)} ms after the HEAD was answered (deadline ${DRAIN_MS} ms)`);
});

t.test('HEAD on an answer whose small rest follows at once: the rest is drained and the connection reused', async (t) => {
  // Only the connection this test uses counts (the previous test's last one is idle in the pool).
  upstreamSockets.clear();
  const head = await httpRequest(gateway.port, '/small', { method: 'HEAD' });
  t.equal(head.status, 200);
  t.equal(head.headers['content-length'], '2000', 'the length a GET would have had');
  t.equal(head.body, '');
  t.equal((await next()).status, 200);
  t.equal((await next()).status, 200);
  t.equal(upstreamSockets.size, 1, 'the HEAD (sent as GET) and the next requests came on one upstream connection');
});
