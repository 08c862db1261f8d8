/**
 * Bytes a broken upstream sends after a 204/304 in a LATER read, once the socket may already carry the
 * next request: they must never be taken for that request's answer. A 204/304 that announces a body
 * (Content-Length > 0, Transfer-Encoding) does not keep its socket; a clean one does.
 */
import net from 'node:net';
import t from 'tap';
import { UpstreamPool } from '../../src/upstream/pool.js';
import type { UpstreamError } from '../../src/upstream/call-errors.js';
import { startRawServer } from '../helpers/raw-upstream.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `/first` is answered with `first`; `straggler` (when given) follows 40 ms later on the same socket,
 * and that socket answers nothing more (as if the straggler were its answer). Anything else: "good".
 */
async function server(first: string, straggler: string | null): Promise<{ origin: string; connections: () => number; close(): Promise<void> }> {
  const poisoned = new WeakSet<net.Socket>();
  const srv = await startRawServer((socket, head) => {
    if (head.startsWith('GET /first ')) {
      socket.write(first);
      if (straggler !== null) {
        poisoned.add(socket);
        setTimeout(() => socket.write(straggler), 40);
      }
    } else if (!poisoned.has(socket)) {
      socket.write('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\ngood');
    }
  });
  return { origin: srv.url, connections: () => srv.connections, close: () => srv.close() };
}

function get(pool: UpstreamPool, path: string): Promise<{ status: number; body: string; error: UpstreamError | null }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let status = 0;
    pool.request('GET', path, [], null, {
      onHead: (s) => ((status = s), true),
      onData: (c) => (chunks.push(Buffer.from(c)), true),
      onEnd: () => resolve({ status, body: Buffer.concat(chunks).toString(), error: null }),
      onError: (error) => resolve({ status, body: '', error }),
      onBodyDrain: () => {},
    });
  });
}

const SMUGGLED = 'HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil';

for (const [name, first] of [
  ['204 with Content-Length', 'HTTP/1.1 204 No Content\r\nContent-Length: 39\r\n\r\n'],
  ['304 with Content-Length', 'HTTP/1.1 304 Not Modified\r\nContent-Length: 39\r\n\r\n'],
  ['304 with Transfer-Encoding', 'HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n'],
] as const) {
  t.test(`${name}, a body-shaped answer following in a later read: the next request never gets it`, async (t) => {
    const upstream = await server(first, SMUGGLED);
    t.teardown(() => upstream.close());
    const pool = new UpstreamPool({ origin: upstream.origin, headersTimeoutMs: 2000 });
    t.teardown(() => pool.destroy());
    const answer = await get(pool, '/first');
    t.equal(answer.status, Number(first.slice(9, 12)));
    t.equal(answer.body, '', 'no body');
    // At once: the straggler is still 40 ms away, so a reused socket would carry this request.
    const next = await get(pool, '/next');
    t.equal(next.error, null);
    t.equal(next.body, 'good', 'answered by the upstream, not by the straggler');
    t.equal(upstream.connections(), 2, 'on a fresh connection');
    await sleep(80);
    t.equal((await get(pool, '/again')).body, 'good');
  });
}

t.test('a clean 204 / 304 (no body announced, or Content-Length: 0) keeps its socket', async (t) => {
  for (const first of ['HTTP/1.1 204 No Content\r\n\r\n', 'HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n', 'HTTP/1.1 304 Not Modified\r\nETag: "x"\r\n\r\n']) {
    const upstream = await server(first, null);
    const pool = new UpstreamPool({ origin: upstream.origin });
    await get(pool, '/first');
    t.equal((await get(pool, '/next')).body, 'good');
    t.equal(upstream.connections(), 1, `${JSON.stringify(first.split('\r\n').slice(0, 2).join(' '))}: one connection`);
    pool.destroy();
    await upstream.close();
  }
});
