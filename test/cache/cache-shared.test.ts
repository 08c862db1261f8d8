// The responseCache's `local` store as one cache per instance, through the running gateway with its
// default 2 workers and real upstreams: a miss on one worker is a hit on the other, an unsafe request
// invalidates for both, the byte bound holds for the instance, entries survive a worker's replacement,
// and a worker killed while writing leaves the store readable.
import { readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { Agent, request } from 'undici';
import { eventually, httpRequest, startGateway, testConfig } from '../helpers/gateway-process.js';
import { startCacheUpstream } from '../helpers/cache-gateway.js';
import { rawRequest } from '../helpers/raw-http.js';

const MB = 1024 * 1024;
// 600 MB through an 8 MB store: 75 times its bound. A store that kept them, or a worker that kept 1 MB
// of each, fails the bounds below (48 MB of files, 400 MB of RSS) by far. CACHE_TEST_COUNT for longer runs.
const COUNT = Number(process.env.CACHE_TEST_COUNT ?? 600);
const big = Buffer.alloc(MB, 'z');
/** When each GET /dynamic/ request reached the upstream, and when each was answered (performance.now()). */
const dynamicArrivals: number[] = [];
const dynamicAnswers: number[] = [];
const app = await startCacheUpstream(t, (path, res) => {
  if (path.startsWith('/slow/')) {
    setTimeout(() => {
      res.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'max-age=600' });
      res.end('slow answer');
    }, 300);
    return;
  }
  if (path.startsWith('/dynamic/')) {
    dynamicArrivals.push(performance.now());
    setTimeout(() => {
      dynamicAnswers.push(performance.now());
      res.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'no-store' });
      res.end('never stored');
    }, 600);
    return;
  }
  if (path.startsWith('/big/')) {
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'cache-control': 'max-age=600' });
    res.end(big);
    return;
  }
  res.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'max-age=600' });
  res.end(`body of ${path} #${app.seen.get(`GET ${path}`)}`);
});
const endpoints = [
  { method: 'GET', path: '/items/{id}', 'x-disabled-middleware': ['bigcache'] },
  { method: 'PUT', path: '/items/{id}', 'x-disabled-middleware': ['bigcache'] },
  { method: 'GET', path: '/big/{id}', 'x-disabled-middleware': ['cache'] },
  { method: 'GET', path: '/slow/{id}', 'x-disabled-middleware': ['bigcache'] },
  { method: 'GET', path: '/dynamic/{id}', 'x-disabled-middleware': ['bigcache'] },
];
const maxBytes = 8 * MB;
const gateway = await startGateway(t, {
  config: testConfig([{ serviceType: 'static', serviceLocation: app.location, endpoints }], {
    accessLog: { enabled: false },
    middleware: [
      { id: 'cache', type: 'responseCache' },
      { id: 'bigcache', type: 'responseCache', maxBytes, maxEntryBytes: 2 * MB },
    ],
  }),
  waitFor: (line) => line.msg === 'gateway operational',
  startTimeoutMs: 60_000,
});

interface Answer {
  worker: string;
  status: number;
  headers: Record<string, string[]>;
  body: Buffer;
}

/** One fresh connection: the health check names the worker, then the request on that connection. */
async function ask(method: string, path: string, extra = ''): Promise<Answer> {
  const head = (m: string, p: string, more = '') => `${m} ${p} HTTP/1.1\r\nHost: gw\r\n${more}\r\n`;
  const body = method === 'PUT' ? 'Content-Length: 2\r\n' : '';
  const payload = head('GET', '/healthcheck') + head(method, path, extra + body) + (method === 'PUT' ? '{}' : '');
  const result = await rawRequest(gateway.port, payload, { responses: 2, waitMs: 10_000 });
  const [health, answer] = result.responses;
  if (!health?.complete || !answer?.complete) throw new Error(`${method} ${path}: no complete answer`);
  return { worker: health.headers['x-gateway-worker']![0]!, status: answer.status, headers: answer.headers, body: answer.body };
}

/** Asks until a worker other than `not` answers (fresh connections spread over the workers). */
async function askOther(not: string, method: string, path: string): Promise<Answer> {
  for (let i = 0; i < 60; i++) {
    const answer = await ask(method, path);
    if (answer.worker !== not) return answer;
  }
  throw new Error('the other worker never answered');
}

function workerPids(): string[] {
  return [...new Set(gateway.lines.filter((l) => l.role === 'worker' && typeof l.pid === 'number').map((l) => String(l.pid)))];
}

t.test('a miss on one worker is a hit on the other (one upstream request)', async (t) => {
  const first = await ask('GET', '/items/a');
  t.equal(first.headers['x-cache']?.[0], 'MISS');
  const second = await askOther(first.worker, 'GET', '/items/a');
  t.equal(second.headers['x-cache']?.[0], 'HIT', `worker ${second.worker} hits what ${first.worker} stored`);
  t.equal(second.body.toString(), 'body of /items/a #1');
  t.equal(app.seen.get('GET /items/a'), 1);
});

t.test('a PUT on one worker invalidates the entry for every worker', async (t) => {
  const first = await ask('GET', '/items/b');
  const other = await askOther(first.worker, 'GET', '/items/b');
  t.equal(other.headers['x-cache']?.[0], 'HIT');
  const put = await ask('PUT', '/items/b');
  t.equal(put.status, 204);
  // Both workers: the next GET on each goes upstream once, then both hit the new entry.
  const seenWorkers = new Map<string, string>();
  for (let i = 0; i < 40 && seenWorkers.size < 2; i++) {
    const answer = await ask('GET', '/items/b');
    if (!seenWorkers.has(answer.worker)) seenWorkers.set(answer.worker, answer.body.toString());
  }
  t.equal(seenWorkers.size, 2, 'both workers answered');
  for (const [worker, body] of seenWorkers) t.equal(body, 'body of /items/b #2', `worker ${worker} serves the refetched answer`);
  t.equal(app.seen.get('GET /items/b'), 2, 'one refetch for the instance');
});

t.test('30 concurrent misses on a 300 ms upstream, spread over both workers: one upstream request', async (t) => {
  const answers = await Promise.all(Array.from({ length: 30 }, () => ask('GET', '/slow/1')));
  t.equal(app.seen.get('GET /slow/1'), 1, 'one upstream request for the instance');
  t.equal(new Set(answers.map((a) => a.worker)).size, 2, 'both workers answered');
  t.ok(answers.every((a) => a.status === 200 && a.body.toString() === 'slow answer'), 'every client got the answer');
  t.same(answers.map((a) => a.headers['x-cache']?.[0]).sort(), [...Array(29).fill('HIT'), 'MISS']);
});

t.test('after an answer that may not be stored, concurrent misses of its key go upstream together, not behind a leader', async (t) => {
  // Each worker learns it from an answer of its own.
  const first = await ask('GET', '/dynamic/1');
  await askOther(first.worker, 'GET', '/dynamic/1');
  dynamicArrivals.length = 0;
  dynamicAnswers.length = 0;
  const started = performance.now();
  const answers = await Promise.all(Array.from({ length: 10 }, () => ask('GET', '/dynamic/1')));
  const took = performance.now() - started;
  t.ok(answers.every((a) => a.status === 200 && a.headers['x-cache']?.[0] === 'BYPASS'), 'every answer passed the cache (BYPASS)');
  t.equal(dynamicArrivals.length, 10, 'each went upstream');
  // Behind a leader a request reaches the upstream only once the leader's answer is back (600 ms later):
  // compared with when the first answer left the upstream, not with a fixed time, which a busy host stretches.
  const lastArrival = Math.max(...dynamicArrivals) - Math.min(...dynamicArrivals);
  const firstAnswer = Math.min(...dynamicAnswers) - Math.min(...dynamicArrivals);
  t.ok(lastArrival < firstAnswer, `the last reached the upstream ${Math.round(lastArrival)} ms after the first, before any was answered (${Math.round(firstAnswer)} ms)`);
  t.comment(`10 concurrent requests answered in ${Math.round(took)} ms`);
});

function storeFiles(): { dir: string; bytes: number } {
  const pid = gateway.child.pid;
  const dir = readdirSync(tmpdir()).find((name) => name.startsWith(`specgate-cache-${pid}-`));
  if (dir === undefined) throw new Error('no instance cache directory');
  let bytes = 0;
  for (const name of readdirSync(join(tmpdir(), dir))) bytes += statSync(join(tmpdir(), dir, name)).size;
  return { dir: join(tmpdir(), dir), bytes };
}

async function metric(id: string, name: string): Promise<number> {
  const text = (await httpRequest(gateway.port, '/metrics')).body;
  const body = JSON.parse(text);
  return body.middleware?.[id]?.[name] ?? NaN;
}

t.test('the byte bound holds for the instance under 600 distinct 1 MB answers (RSS and store size)', { timeout: 240_000 }, async (t) => {
  const started = performance.now();
  let next = 0;
  let hits = 0;
  const dispatcher = new Agent({ connections: 8 });
  t.teardown(() => dispatcher.close());
  const worker = async (): Promise<void> => {
    while (next < COUNT) {
      const i = next++;
      // Host as ask() sends it: the host is part of the key (test/cache/cache-origin-key.test.ts).
      const answer = await request(`http://127.0.0.1:${gateway.port}/big/${i}`, { dispatcher, headers: { host: 'gw' } });
      const body = Buffer.from(await answer.body.arrayBuffer());
      if (answer.statusCode !== 200 || body.length !== MB) throw new Error(`/big/${i}: ${answer.statusCode} ${body.length}`);
      if (answer.headers['x-cache'] === 'HIT') hits++;
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
  t.equal(hits, 0, 'every answer distinct');
  const { dir, bytes } = storeFiles();
  t.comment(`${COUNT} x 1 MB in ${Math.round(performance.now() - started)} ms; store ${dir}: ${(bytes / MB).toFixed(1)} MB on disk for maxBytes ${maxBytes / MB} MB`);
  t.ok(bytes < 4 * maxBytes + 16 * MB, `the store's files stay near the bound (${(bytes / MB).toFixed(1)} MB)`);
  const rss: number[] = [];
  for (const pid of workerPids()) {
    try {
      const status = (await import('node:fs')).readFileSync(`/proc/${pid}/status`, 'utf8');
      const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1]);
      if (kb > 0) rss.push(kb * 1024);
    } catch {
      // a worker that is gone
    }
  }
  t.comment(`worker RSS: ${rss.map((n) => `${(n / MB).toFixed(0)} MB`).join(', ')}`);
  for (const n of rss) t.ok(n < 400 * MB, `a worker's RSS stays bounded (${(n / MB).toFixed(0)} MB)`);
  // The last ones stored are still there; the first ones were evicted. A store is written after its
  // answer went out, so the last writes may still be under way on a busy machine (a MISS for the
  // last answer in one run): wait until stored bytes and evictions stop moving.
  let last = '';
  await eventually(
    async () => {
      const now = `${await metric('bigcache', 'bytesStored')}/${await metric('bigcache', 'evictions')}`;
      const settled = now === last;
      last = now;
      return settled ? true : undefined;
    },
    10_000,
    300,
    'the store settled',
  );
  t.comment(`settled at bytesStored/evictions ${last}`);
  t.equal((await ask('GET', `/big/${COUNT - 1}`)).headers['x-cache']?.[0], 'HIT');
  t.equal((await ask('GET', '/big/0')).headers['x-cache']?.[0], 'MISS');
  const stored = await metric('bigcache', 'bytesStored');
  if (!Number.isNaN(stored)) t.ok(stored <= maxBytes, `bytesStored ${stored} within maxBytes`);
});

t.test('a worker killed while writing leaves the store readable; entries survive its replacement', async (t) => {
  const before = await ask('GET', '/items/survivor');
  t.equal(before.headers['x-cache']?.[0], 'MISS');
  // Writes in flight on both workers, then one worker dies.
  let stop = false;
  let n = 0;
  const load = async (): Promise<void> => {
    while (!stop) {
      const i = 10_000 + n++;
      await request(`http://127.0.0.1:${gateway.port}/big/${i}`, { dispatcher })
        .then((answer) => answer.body.dump())
        .catch(() => undefined);
    }
  };
  const dispatcher = new Agent({ connections: 6 });
  t.teardown(() => dispatcher.close());
  const loads = Array.from({ length: 6 }, load);
  await new Promise((resolve) => setTimeout(resolve, 300));
  const victim = Number(before.worker);
  process.kill(victim, 'SIGKILL');
  await new Promise((resolve) => setTimeout(resolve, 200));
  stop = true;
  await Promise.all(loads);
  const replaced = await eventually(
    async () => {
      const answers = await Promise.all(Array.from({ length: 6 }, () => ask('GET', '/items/survivor').catch(() => undefined)));
      const workers = new Set(answers.filter((a) => a !== undefined).map((a) => a!.worker));
      return workers.size === 2 && !workers.has(String(victim)) ? answers : undefined;
    },
    20_000,
    200,
    'a replacement worker serving',
  );
  for (const answer of replaced) {
    t.equal(answer!.headers['x-cache']?.[0], 'HIT', `worker ${answer!.worker}: the entry stored before the kill is a hit`);
  }
  t.equal(app.seen.get('GET /items/survivor'), 1);
  // The store still takes writes and serves them.
  const fresh = await ask('GET', '/items/after-kill');
  t.equal(fresh.headers['x-cache']?.[0], 'MISS');
  t.equal((await askOther(fresh.worker, 'GET', '/items/after-kill')).headers['x-cache']?.[0], 'HIT');
});
