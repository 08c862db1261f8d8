// Cache keys longer than LMDB takes (1,978 bytes), through the running gateway (2 workers) and the
// `local` store: a 4 KB URL (a GraphQL GET), a 3 KB value of a Vary'd request header, and a Vary of 400
// header names. Each is stored, served as a HIT by both workers, coalesced (one upstream request for
// concurrent misses across the workers) and dropped by a POST to its URL, with the cache's own X-Cache
// on every answer (the upstream's never reaches the client).
import t, { type Test } from 'tap';
import { httpRequest, startUpstream } from '../helpers/gateway-process.js';
import { startCachingGateway } from '../helpers/cache-gateway.js';
import { rawRequest } from '../helpers/raw-http.js';

const VARY_NAMES = Array.from({ length: 400 }, (_, i) => `x-h${i}`);
const app = await startUpstream(t, {
  name: 'app',
  handle: (req, res) => {
    const url = new URL(req.url ?? '/', 'http://upstream');
    if (req.method === 'POST') {
      res.writeHead(204);
      res.end();
      return;
    }
    const headers: Record<string, string> = { 'content-type': 'text/plain', 'cache-control': 'max-age=600', 'x-cache': 'HIT from upstream' };
    if (url.pathname.startsWith('/items/vary-header')) headers.vary = 'X-Big';
    if (url.pathname.startsWith('/items/vary-many')) headers.vary = VARY_NAMES.join(', ');
    const n = app.seen.get(`GET ${url.pathname}`);
    // Slow enough for concurrent misses to meet.
    setTimeout(() => {
      res.writeHead(200, headers);
      res.end(`${url.pathname} #${n}`);
    }, 300);
  },
});
const gateway = await startCachingGateway(t, app.location, ['GET /items/{id}', 'POST /items/{id}']);

interface Answer {
  worker: string;
  status: number;
  xCache: string[] | undefined;
  body: string;
}

/** One fresh connection: the health check names the worker, then the request on that connection. */
async function ask(method: string, target: string, extra = ''): Promise<Answer> {
  const head = (m: string, p: string, more = '') => `${m} ${p} HTTP/1.1\r\nHost: gw\r\n${more}\r\n`;
  const body = method === 'POST' ? 'Content-Length: 2\r\n' : '';
  const payload = head('GET', '/healthcheck') + head(method, target, extra + body) + (method === 'POST' ? '{}' : '');
  const result = await rawRequest(gateway.port, payload, { responses: 2, waitMs: 10_000 });
  const [health, answer] = result.responses;
  if (!health?.complete || !answer?.complete) throw new Error(`${method} ${target.slice(0, 40)}...: no complete answer`);
  return { worker: health.headers['x-gateway-worker']![0]!, status: answer.status, xCache: answer.headers['x-cache'], body: answer.body.toString() };
}

/** The first answer of each worker to GET `target`. */
async function eachWorker(target: string, extra: string): Promise<Answer[]> {
  const seen = new Map<string, Answer>();
  for (let i = 0; i < 80 && seen.size < 2; i++) {
    const answer = await ask('GET', target, extra);
    if (!seen.has(answer.worker)) seen.set(answer.worker, answer);
  }
  if (seen.size < 2) throw new Error('both workers never answered');
  return [...seen.values()];
}

async function metric(name: string): Promise<number> {
  const text = (await httpRequest(gateway.port, '/metrics')).body;
  return JSON.parse(text).middleware?.cache?.[name] ?? 0;
}

/** Stored, a HIT on both workers, coalesced, and dropped by a POST to the URL. */
async function behavesLikeAnyKey(t: Test, path: string, query: string, extra: string): Promise<void> {
  const target = `${path}${query}`;
  const miss = await ask('GET', target, extra);
  t.equal(miss.status, 200);
  t.same(miss.xCache, ['MISS'], "the cache's own X-Cache, alone");
  t.equal(miss.body, `${path} #1`);
  for (const answer of await eachWorker(target, extra)) {
    t.same(answer.xCache, ['HIT'], `a HIT on worker ${answer.worker}`);
    t.equal(answer.body, `${path} #1`);
  }
  t.equal(app.seen.get(`GET ${path}`), 1, 'one upstream request');

  const post = await ask('POST', target);
  t.equal(post.status, 204);
  t.same(post.xCache, ['BYPASS']);
  // Concurrent misses spread over both workers: one goes upstream, the others wait for its entry.
  const herd = await Promise.all(Array.from({ length: 12 }, () => ask('GET', target, extra)));
  t.equal(app.seen.get(`GET ${path}`), 2, 'dropped by the POST, then fetched once for 12 concurrent misses');
  t.equal(new Set(herd.map((a) => a.worker)).size, 2, 'both workers answered');
  t.same(herd.map((a) => a.xCache?.join(',')).sort(), ['MISS', ...Array(11).fill('HIT')].sort());
  t.ok(
    herd.every((a) => a.body === `${path} #2`),
    'every client got the refetched answer',
  );
}

t.test('a 4 KB URL', async (t) => {
  const query = `?query=${'q'.repeat(4096)}`;
  await behavesLikeAnyKey(t, '/items/long-url', query, '');
  // Another URL with the same first 2 KB is another entry, and survives the POST above.
  const sibling = `/items/long-url${query}x`;
  t.same((await ask('GET', sibling)).xCache, ['MISS'], 'a longer URL that starts with it is another entry');
  t.same((await ask('GET', sibling)).xCache, ['HIT']);
  await ask('POST', `/items/long-url${query}`);
  t.same((await ask('GET', sibling)).xCache, ['HIT'], "a POST to the other URL leaves it alone");
});

t.test('a 3 KB value of a Vary\'d request header', async (t) => {
  const big = `X-Big: ${'v'.repeat(3072)}\r\n`;
  await behavesLikeAnyKey(t, '/items/vary-header', '', big);
  // The same header with another value is another variant.
  t.same((await ask('GET', '/items/vary-header', `X-Big: ${'v'.repeat(3071)}w\r\n`)).xCache, ['MISS'], 'another value, another variant');
});

t.test('a Vary of 400 header names', async (t) => {
  await behavesLikeAnyKey(t, '/items/vary-many', '', 'X-H7: seven\r\n');
});

t.test('no store errors, no failures of the cache', async (t) => {
  // On a failure, what the gateway logged about it (the first few lines) says why.
  const logged = () => gateway.lines.filter((line) => String(line.msg).startsWith('responseCache "cache"')).slice(0, 4);
  t.equal(await metric('storeErrors'), 0, 'no store errors', { logged: logged() });
  t.equal(await metric('errors'), 0, 'no failures of the cache', { logged: logged() });
});
