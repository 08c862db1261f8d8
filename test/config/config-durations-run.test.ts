// Durations at their largest accepted values, through a running gateway: a timer fed from one (or from a
// sum of one and another setting) waits as long as it says instead of firing after 1 ms, and the
// lifetimes allowed past 2^31 - 1 ms (config-durations.test.ts, LIFETIMES) work as lifetimes.
import t from 'tap';
import { MAX_LIFETIME_MS, MAX_TIMER_MS } from '../../src/config/durations.js';
import { MAX_WINDOW_MS } from '../../src/stores/gcra.js';
import { httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

const app = await startUpstream(t, {
  name: 'app',
  handle: (req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    const delay = path.startsWith('/slow/') ? 1500 : path.startsWith('/lead/') ? 800 : 0;
    setTimeout(() => {
      // No freshness of its own: only defaultTtlMs lets the cache keep it.
      res.writeHead(200, { 'content-type': 'text/plain', ...(path.startsWith('/lead/') ? { 'cache-control': 'max-age=600' } : {}) });
      res.end(`answer #${app.seen.get(`GET ${path}`)}`);
    }, delay);
  },
});
const endpoint = (path: string, only: string) => ({ method: 'GET', path, 'x-disabled-middleware': ['cache', 'coalesce', 'limit'].filter((id) => id !== only) });
const upstream = {
  serviceType: 'static',
  serviceLocation: app.location,
  endpoints: [endpoint('/slow/{id}', ''), endpoint('/lead/{id}', 'coalesce'), endpoint('/kept/{id}', 'cache'), endpoint('/limited/{id}', 'limit')],
};

t.test('a shutdown grace of 2147483647 ms lets an in-flight request finish', async (t) => {
  const gateway = await startGateway(t, {
    config: testConfig([upstream], { timeouts: { upstreamMs: 5000, connectMs: 1000, clientRequestMs: 10_000, shutdownGraceMs: MAX_TIMER_MS }, accessLog: { enabled: false } }),
    workers: 1,
    waitFor: (line) => line.msg === 'gateway operational',
  });
  const answer = httpRequest(gateway.port, '/slow/1');
  while ((app.seen.get('GET /slow/1') ?? 0) === 0) await new Promise((resolve) => setTimeout(resolve, 10));
  gateway.signal('SIGTERM');
  const result = await answer;
  t.equal(result.status, 200, 'answered, not cut off by a kill');
  t.equal(result.body, 'answer #1');
  t.same(await gateway.exited, { code: 0, signal: null });
  t.notOk(gateway.lines.some((line) => /outlived/.test(String(line.msg))), 'no worker was killed or forced out');
});

t.test('timers and lifetimes at their maximum in the middleware', async (t) => {
  const gateway = await startGateway(t, {
    config: testConfig([upstream], {
      accessLog: { enabled: false },
      middleware: [
        // lockTimeoutMs + slaMs is past what a timer takes: the follower still waits for the leader.
        { id: 'coalesce', type: 'responseCache', lockTimeoutMs: MAX_TIMER_MS },
        { id: 'cache', type: 'responseCache', defaultTtlMs: MAX_LIFETIME_MS, staleIfErrorMs: MAX_LIFETIME_MS, heuristicMaxTtlMs: MAX_LIFETIME_MS },
        { id: 'limit', type: 'rateLimit', limit: 1, windowMs: MAX_WINDOW_MS },
      ],
    }),
    workers: 1,
    waitFor: (line) => line.msg === 'gateway operational',
  });

  await t.test('lockTimeoutMs 2147483647: a concurrent miss waits for the request already fetching', async (t) => {
    const [first, second] = await Promise.all([httpRequest(gateway.port, '/lead/1'), new Promise((r) => setTimeout(r, 100)).then(() => httpRequest(gateway.port, '/lead/1'))]);
    t.equal(first.status, 200);
    t.equal(second.status, 200);
    t.equal(app.seen.get('GET /lead/1'), 1, 'one request reached the upstream');
    t.same([first.headers['x-cache'], second.headers['x-cache']], ['MISS', 'HIT']);
  });

  await t.test(`defaultTtlMs ${MAX_LIFETIME_MS}: an answer without freshness is kept`, async (t) => {
    t.equal((await httpRequest(gateway.port, '/kept/1')).headers['x-cache'], 'MISS');
    const again = await httpRequest(gateway.port, '/kept/1');
    t.equal(again.headers['x-cache'], 'HIT');
    t.equal(again.body, 'answer #1');
  });

  await t.test(`windowMs ${MAX_WINDOW_MS}: one request per 31 days`, async (t) => {
    const first = await httpRequest(gateway.port, '/limited/1');
    t.equal(first.status, 200);
    t.equal(first.headers['ratelimit-policy'], `"limit";q=1;w=${MAX_WINDOW_MS / 1000}`);
    const second = await httpRequest(gateway.port, '/limited/1');
    t.equal(second.status, 429);
    const retryAfter = Number(second.headers['retry-after']);
    t.ok(retryAfter > MAX_WINDOW_MS / 1000 - 60 && retryAfter <= MAX_WINDOW_MS / 1000, `Retry-After ${retryAfter} s: the whole window`);
  });
});
