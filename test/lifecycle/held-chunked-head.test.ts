/**
 * An answer without a Content-Length whose upstream fails after its head and before its first body
 * byte: the gateway holds such a head until the first body bytes or the end come (uWS would send it
 * without its blank line, which it writes with the first chunk only), so the failure is answered as
 * one before the head: a complete 502 or 504 problem, or a stale cached answer. A client never gets a
 * head cut mid-way, which some read as a whole empty answer. Heads that wait and then go on arrive
 * whole, a large one (spilled over several corks) too.
 */
import type net from 'node:net';
import t from 'tap';
import { Counters } from '../../src/metrics/counters.js';
import { buildPipeline } from '../../src/middleware/registry.js';
import { rawRequest } from '../helpers/raw-http.js';
import { startRawServer } from '../helpers/raw-upstream.js';
import { entry } from '../helpers/upstream-server.js';
import { planeInFrontOf } from '../helpers/data-plane.js';

const UPSTREAM_MS = 400;
const CHUNKED_HEAD = 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Kept: yes\r\nTransfer-Encoding: chunked\r\n\r\n';
const BIG_VALUE = 'v'.repeat(1000);
const BIG_HEAD = `HTTP/1.1 200 OK\r\n${Array.from({ length: 14 }, (_, i) => `X-Big-${i}: ${BIG_VALUE}\r\n`).join('')}Transfer-Encoding: chunked\r\n\r\n`;

/** What the upstream does for each path: the head now, and what follows. */
const scripts: Record<string, (socket: net.Socket) => void> = {
  '/close': (socket) => {
    socket.write(CHUNKED_HEAD);
    setTimeout(() => socket.destroy(), 30);
  },
  '/stall': (socket) => socket.write(CHUNKED_HEAD),
  '/stall-until-close': (socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n'),
  '/late': (socket) => {
    socket.write(CHUNKED_HEAD);
    setTimeout(() => socket.write('5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n'), 30);
  },
  '/late-empty': (socket) => {
    socket.write(CHUNKED_HEAD);
    setTimeout(() => socket.write('0\r\n\r\n'), 30);
  },
  '/late-big': (socket) => {
    socket.write(BIG_HEAD);
    setTimeout(() => socket.write('5\r\nhello\r\n0\r\n\r\n'), 30);
  },
  '/cached': (socket) => {
    if (cacheFilled) {
      socket.write(CHUNKED_HEAD);
      setTimeout(() => socket.destroy(), 30);
      return;
    }
    socket.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nCache-Control: max-age=1\r\nContent-Length: 6\r\n\r\nstored');
  },
};
let cacheFilled = false;

const upstream = await startRawServer((socket, head) => {
  const path = head.split(' ')[1]!;
  scripts[path]!(socket);
});
t.teardown(() => upstream.close());
const plane = await planeInFrontOf(
  t,
  upstream.url,
  Object.keys(scripts).map((path) => entry('GET', path, upstream.url)),
  { config: { timeouts: { upstreamMs: UPSTREAM_MS, connectMs: 1000, clientRequestMs: 5000, shutdownGraceMs: 500 } } },
);

async function get(path: string) {
  const res = await rawRequest(plane.port, `GET ${path} HTTP/1.1\r\nHost: gw\r\n\r\n`, { responses: 1, waitMs: 5000 });
  return { raw: res.data.toString('latin1'), response: res.responses[0] };
}

t.test('the upstream closes after a chunked head: a complete 502 problem', async (t) => {
  const { raw, response } = await get('/close');
  t.ok(response, `one complete answer: ${JSON.stringify(raw)}`);
  t.equal(response!.status, 502);
  t.equal(response!.headers['content-type']?.[0], 'application/problem+json');
  t.equal(response!.headers['x-kept'], undefined, 'none of the upstream head went out');
  t.equal(raw.indexOf('HTTP/1.1', 1), -1, 'one status line');
});

t.test('the upstream stalls after a chunked head: a complete 504 problem', async (t) => {
  const { raw, response } = await get('/stall');
  t.ok(response, `one complete answer: ${JSON.stringify(raw)}`);
  t.equal(response!.status, 504);
  t.equal(response!.headers['content-type']?.[0], 'application/problem+json');
  t.equal(raw.indexOf('HTTP/1.1', 1), -1, 'one status line');
});

t.test('the upstream stalls after a close-delimited head: a complete 504 problem', async (t) => {
  const { raw, response } = await get('/stall-until-close');
  t.ok(response, `one complete answer: ${JSON.stringify(raw)}`);
  t.equal(response!.status, 504);
  t.equal(raw.indexOf('HTTP/1.1', 1), -1, 'one status line');
});

t.test('a held head goes out with the first chunk', async (t) => {
  const { response } = await get('/late');
  t.equal(response?.status, 200);
  t.ok(response?.complete);
  t.equal(response?.body.toString(), 'helloabc');
  t.same(response?.headers['x-kept'], ['yes']);
  t.same(response?.headers['content-type'], ['application/json']);
  t.equal(response?.headers.via?.length, 1);
});

t.test('a held head goes out with the end of an empty body', async (t) => {
  const { response } = await get('/late-empty');
  t.equal(response?.status, 200);
  t.ok(response?.complete);
  t.equal(response?.body.length, 0);
  t.same(response?.headers['x-kept'], ['yes']);
});

t.test('a held head larger than one cork goes out whole with the first chunk', async (t) => {
  const { response } = await get('/late-big');
  t.equal(response?.status, 200);
  t.ok(response?.complete);
  t.equal(response?.body.toString(), 'hello');
  for (let i = 0; i < 14; i++) t.same(response?.headers[`x-big-${i}`], [BIG_VALUE], `x-big-${i}`);
});

t.test('stale-if-error serves the stored answer when the upstream closes after a chunked head', async (t) => {
  const pipeline = buildPipeline(
    [{ id: 'cache', type: 'responseCache', slaMs: 1000, store: 'local', maxEntryBytes: 131072, maxBytes: 67108864, defaultTtlMs: 0, staleIfErrorMs: 60000 }],
    { metrics: new Counters(), warn: () => {} },
  );
  plane.setPipeline(pipeline);
  t.teardown(() => pipeline.close());
  const first = await get('/cached');
  t.equal(first.response?.headers['x-cache']?.[0], 'MISS');
  cacheFilled = true;
  await new Promise((resolve) => setTimeout(resolve, 1100));
  const { raw, response } = await get('/cached');
  t.ok(response, `one complete answer: ${JSON.stringify(raw)}`);
  t.equal(response!.status, 200);
  t.equal(response!.headers['x-cache']?.[0], 'STALE');
  t.equal(response!.body.toString(), 'stored');
});
