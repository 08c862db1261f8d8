// Entries of 16 MiB and more in the `local` store, through the running gateway (2 workers): lmdb hands
// such values over as a view of its memory map, not as a Buffer. The entry is read back by both
// workers, replaced, invalidated and evicted like any other, and the store keeps taking writes.
import t from 'tap';
import { eventually, httpRequest } from '../helpers/gateway-process.js';
import { startCacheUpstream, startCachingGateway } from '../helpers/cache-gateway.js';
import { Client } from 'undici';

const MB = 1024 * 1024;
const SIZE = 17 * MB;

/** Version n of a path's body: SIZE bytes, all of one letter, so a mixed-up body shows. */
function body(n: number): Buffer {
  return Buffer.alloc(SIZE, String.fromCharCode(0x61 + (n % 26)));
}

const app = await startCacheUpstream(t, (path, res) => {
  const n = app.seen.get(`GET ${path}`) ?? 1;
  if (path.startsWith('/big/')) {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'cache-control': 'max-age=600', 'x-version': String(n) });
    res.end(body(n));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'max-age=600' });
  res.end(`${path} #${n}`);
});
const gateway = await startCachingGateway(t, app.location, ['GET /big/{id}', 'PUT /big/{id}', 'GET /items/{id}'], { maxEntryBytes: 20 * MB, maxBytes: 40 * MB });

interface Answer {
  worker: string;
  status: number;
  xCache: string | undefined;
  version: string | undefined;
  body: Buffer;
}

/** One fresh connection: the health check names the worker, then the request on that connection. */
async function ask(method: string, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  const client = new Client(`http://127.0.0.1:${gateway.port}`, { pipelining: 1 });
  try {
    const health = await client.request({ method: 'GET', path: '/healthcheck', headers: { host: 'gw' } });
    await health.body.dump();
    const answer = await client.request({ method, path, headers: { host: 'gw', ...headers }, body: method === 'PUT' ? '{}' : undefined });
    const text = (name: string) => {
      const value = answer.headers[name];
      return Array.isArray(value) ? value[0] : value;
    };
    return {
      worker: String(health.headers['x-gateway-worker']),
      status: answer.statusCode,
      xCache: text('x-cache'),
      version: text('x-version'),
      body: Buffer.from(await answer.body.arrayBuffer()),
    };
  } finally {
    await client.close();
  }
}

/** Asks until a worker other than `not` answers. */
async function askOther(not: string, path: string): Promise<Answer> {
  for (let i = 0; i < 60; i++) {
    const answer = await ask('GET', path);
    if (answer.worker !== not) return answer;
  }
  throw new Error('the other worker never answered');
}

async function metric(name: string): Promise<number> {
  const text = (await httpRequest(gateway.port, '/metrics')).body;
  return JSON.parse(text).middleware?.cache?.[name] ?? 0;
}

function whole(answer: Answer, n: number): boolean {
  return answer.status === 200 && answer.body.equals(body(n));
}

t.test('a 17 MiB entry is read back by both workers, replaced, invalidated and evicted; the store keeps working', { timeout: 120_000 }, async (t) => {
  const first = await ask('GET', '/big/a');
  t.equal(first.xCache, 'MISS');
  t.ok(whole(first, 1), 'the whole 17 MiB answer');
  const again = await ask('GET', '/big/a');
  t.equal(again.xCache, 'HIT', 'read back');
  t.ok(whole(again, 1), 'the stored body, whole');
  const other = await askOther(again.worker, '/big/a');
  t.equal(other.xCache, 'HIT', 'read back by the other worker');
  t.ok(whole(other, 1));

  // Replaced: a request no-cache refetches and stores the new answer over the old one.
  const refreshed = await ask('GET', '/big/a', { 'cache-control': 'no-cache' });
  t.equal(refreshed.xCache, 'MISS');
  t.equal(refreshed.version, '2');
  const replaced = await ask('GET', '/big/a');
  t.equal(replaced.xCache, 'HIT', 'the replacement is a hit');
  t.ok(whole(replaced, 2), 'with the new body');

  // Invalidated: a PUT drops it for both workers.
  t.equal((await ask('PUT', '/big/a')).status, 204);
  const dropped = await ask('GET', '/big/a');
  t.equal(dropped.xCache, 'MISS', 'gone after the PUT');
  t.ok(whole(dropped, 3));
  t.equal((await askOther(dropped.worker, '/big/a')).xCache, 'HIT', 'stored again');

  // Evicted: two more 17 MiB entries do not fit 40 MiB beside it; the oldest goes.
  t.equal((await ask('GET', '/big/b')).xCache, 'MISS');
  t.equal((await ask('GET', '/big/c')).xCache, 'MISS');
  t.equal((await ask('GET', '/big/c')).xCache, 'HIT', 'the newest is kept');
  const evicted = await ask('GET', '/big/a');
  t.equal(evicted.xCache, 'MISS', 'the oldest was evicted');
  t.ok(whole(evicted, 4));

  // The store keeps taking writes and serving them.
  const small = await ask('GET', '/items/after');
  t.equal(small.xCache, 'MISS');
  t.equal((await askOther(small.worker, '/items/after')).xCache, 'HIT');
  t.equal(app.seen.get('GET /items/after'), 1);
  await eventually(async () => ((await metric('evictions')) > 0 ? true : undefined), 10_000, 200, 'evictions counted');
  t.equal(await metric('storeErrors'), 0, 'no store errors');
  t.equal(await metric('errors'), 0, 'the cache never failed to decide');
});
