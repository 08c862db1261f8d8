// Middleware through the running gateway (2 workers, real sockets): apiKeyAuth keys changed by SIGHUP,
// rateLimit on the local store holding for the whole instance (fresh connections spread over both
// workers, and one keep-alive connection), its headers, scope, and the health and metrics reports.
import t from 'tap';
import { sha256Hex } from '../../src/middleware/api-key-auth.js';
import { Agent, request } from 'undici';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { rawRequest } from '../helpers/raw-http.js';

const app = await startUpstream(t, {
  name: 'app',
  handle: (req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ consumer: req.headers['x-consumer'] ?? null, key: req.headers['x-api-key'] ?? null }));
  },
});
const endpoints = [
  { method: 'GET', path: '/limited/{id}', 'x-disabled-middleware': ['global-limit'] },
  { method: 'GET', path: '/one-connection', 'x-disabled-middleware': ['global-limit'] },
  { method: 'GET', path: '/global/a', 'x-disabled-middleware': ['limit'] },
  { method: 'GET', path: '/global/b', 'x-disabled-middleware': ['limit'] },
  { method: 'GET', path: '/private', 'x-disabled-middleware': ['limit', 'global-limit'] },
  { method: 'GET', path: '/open', 'x-disabled-middleware': ['auth', 'limit', 'global-limit'] },
];
/**
 * A worker takes tokens from the primary over IPC; on a busy host either process may stall past the
 * default slaMs (100), and onStoreError "allow" then admits the request. These tests count what the
 * bucket admits, so the SLA is kept out of their way.
 */
const SLA_MS = 5000;
const limit = { id: 'limit', type: 'rateLimit', limit: 20, windowMs: 60_000, slaMs: SLA_MS };
/** The bucket refills one token per windowMs / limit. */
const REFILL_MS = limit.windowMs / limit.limit;
/** At most the limit, plus what refilled while the requests ran: a busy host makes them take longer. */
const mostAdmitted = (elapsedMs: number): number => limit.limit + Math.ceil(elapsedMs / REFILL_MS);

function config(keys: Array<{ consumer: string; key: string }>) {
  return testConfig([{ serviceType: 'static', serviceLocation: app.location, endpoints }], {
    accessLog: { enabled: false },
    middleware: [
      { id: 'auth', type: 'apiKeyAuth', keys: keys.map(({ consumer, key }) => ({ consumer, sha256: sha256Hex(key) })) },
      limit,
      { id: 'global-limit', type: 'rateLimit', limit: 5, windowMs: 60_000, scope: 'global', key: 'consumer', slaMs: SLA_MS },
    ],
  });
}

const gateway = await startGateway(t, { config: config([{ consumer: 'alice', key: 'alice-key' }]), waitFor: (line) => line.msg === 'gateway operational' });
const asAlice = { 'x-api-key': 'alice-key' };

t.test('health: the middleware are ready; the local store is listed', async (t) => {
  const health = JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body);
  t.same(health.middleware, { pending: [], ready: ['auth', 'limit', 'global-limit'] });
  t.match(health.kvStores, { local: { type: 'local', state: 'ready' } });
});

/** One fresh connection: the health check names the worker, then `path` with alice's key on the same connection. */
async function askAsAlice(path: string): Promise<{ worker: string; status: number; headers: Record<string, string[]> }> {
  const head = (p: string, extra = '') => `GET ${p} HTTP/1.1\r\nHost: gw\r\n${extra}\r\n`;
  const result = await rawRequest(gateway.port, head('/healthcheck') + head(path, 'X-Api-Key: alice-key\r\n'), { responses: 2, waitMs: 5000 });
  const health = result.responses[0]!;
  const answer = result.responses[1]!;
  return { worker: health.headers['x-gateway-worker']![0]!, status: answer.status, headers: answer.headers };
}

t.test('a limit of 20 admits 20 of 40 requests spread over both workers, with the RateLimit fields', async (t) => {
  const answers = [];
  const started = Date.now();
  for (let i = 0; i < 40; i++) answers.push(await askAsAlice(`/limited/${i}`));
  const most = mostAdmitted(Date.now() - started);
  const admitted = answers.filter((a) => a.status === 200);
  t.ok(admitted.length >= 20 && admitted.length <= most, `${admitted.length} of 40 admitted (20, up to ${most} with what refilled meanwhile)`);
  t.equal(answers.filter((a) => a.status === 429).length, 40 - admitted.length, 'the rest are 429');
  const workers = new Set(admitted.map((a) => a.worker));
  t.equal(workers.size, 2, 'both workers admitted some: the limit held for the instance, not per worker');
  t.same(admitted[0]!.headers['ratelimit-policy'], ['"limit";q=20;w=60']);
  t.match(admitted[0]!.headers.ratelimit![0], /^"limit";r=\d+;t=\d+$/);
  const denied = answers.find((a) => a.status === 429)!;
  t.same(denied.headers['content-type'], ['application/problem+json']);
  t.same(denied.headers['ratelimit-policy'], ['"limit";q=20;w=60'], 'the policy on the 429 too');
  const retryAfter = Number(denied.headers['retry-after']![0]);
  t.ok(retryAfter >= 1 && retryAfter <= 3, `Retry-After ${retryAfter} s (one token every 3 s)`);
  const rate = /^"limit";r=0;t=(\d+)$/.exec(denied.headers.ratelimit![0]!);
  t.ok(rate !== null && Number(rate[1]) <= 60, `${denied.headers.ratelimit![0]}: nothing left, full again within the window`);
});

t.test('one keep-alive connection gets the whole limit, not limit / workers', async (t) => {
  const agent = new Agent({ connections: 1, pipelining: 1 });
  t.teardown(() => agent.close());
  const statuses: number[] = [];
  const started = Date.now();
  for (let i = 0; i < 25; i++) {
    const res = await request(`http://127.0.0.1:${gateway.port}/one-connection`, { headers: asAlice, dispatcher: agent });
    await res.body.dump();
    statuses.push(res.statusCode);
  }
  const most = mostAdmitted(Date.now() - started);
  const admitted = statuses.filter((s) => s === 200).length;
  t.ok(admitted >= 20 && admitted <= most, `${admitted} of 25 admitted on one connection (20, up to ${most} with what refilled meanwhile)`);
});

t.test('scope global: one bucket per consumer across endpoints', async (t) => {
  const statuses: number[] = [];
  for (let i = 0; i < 4; i++) {
    statuses.push((await httpRequest(gateway.port, '/global/a', { headers: asAlice })).status);
    statuses.push((await httpRequest(gateway.port, '/global/b', { headers: asAlice })).status);
  }
  t.same(statuses, [200, 200, 200, 200, 200, 429, 429, 429], '5 in all across /global/a and /global/b');
  t.equal((await httpRequest(gateway.port, '/open')).status, 200, 'an endpoint that disables them all is open');
});

t.test('SIGHUP adds a key and removes another, on the running workers', async (t) => {
  t.equal((await httpRequest(gateway.port, '/private', { headers: { 'x-api-key': 'bob-key' } })).status, 401, 'bob unknown');
  gateway.writeConfig(config([{ consumer: 'bob', key: 'bob-key' }]));
  gateway.signal('SIGHUP');
  await eventually(
    async () => ((await httpRequest(gateway.port, '/private', { headers: { 'x-api-key': 'bob-key' } })).status === 200 ? true : undefined),
    10_000,
    100,
    "bob's key accepted",
  );
  for (let i = 0; i < 4; i++) {
    // Fresh connections: both workers took the new keys.
    const bob = await httpRequest(gateway.port, '/private', { headers: { 'x-api-key': 'bob-key' } });
    t.equal(bob.status, 200);
    t.equal(JSON.parse(bob.body).consumer, 'bob', 'X-Consumer: bob');
    t.equal(JSON.parse(bob.body).key, null, 'the key hidden');
    t.equal((await httpRequest(gateway.port, '/private', { headers: asAlice })).status, 401, "alice's key removed");
  }
});

t.test('/metrics counts decisions per middleware id', async (t) => {
  const metrics = await eventually(async () => {
    const body = JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as { middleware?: Record<string, Record<string, unknown>> };
    const authRejected = (body.middleware?.auth?.rejected as Record<string, number> | undefined)?.['401'] ?? 0;
    return ((body.middleware?.limit?.admitted as number | undefined) ?? 0) >= 40 && authRejected >= 5 ? body : undefined;
    // The workers' counts reach the primary with their periodic reports: longer on a loaded machine.
  }, 15_000);
  t.ok((metrics.middleware!.limit!.admitted as number) >= 40, `limit admitted ${metrics.middleware!.limit!.admitted}`);
  t.ok(((metrics.middleware!.limit!.rejected as Record<string, number>)['429'] ?? 0) >= 19, 'limit rejected 429');
  t.ok(((metrics.middleware!.auth!.rejected as Record<string, number>)['401'] ?? 0) >= 5, 'auth rejected 401 (bob before his key, alice after hers was removed)');
});

t.test('two consumers taking turns on one connection (one worker) each have their own bucket', async (t) => {
  gateway.writeConfig(config([{ consumer: 'carol', key: 'carol-key' }, { consumer: 'dave', key: 'dave-key' }]));
  gateway.signal('SIGHUP');
  await eventually(
    async () => ((await httpRequest(gateway.port, '/open')).status === 200 && (await httpRequest(gateway.port, '/private', { headers: { 'x-api-key': 'dave-key' } })).status === 200 ? true : undefined),
    10_000,
    100,
    'carol and dave known',
  );
  const agent = new Agent({ connections: 1, pipelining: 1 });
  t.teardown(() => agent.close());
  const statuses: Record<string, number[]> = { carol: [], dave: [] };
  for (let i = 0; i < 7; i++) {
    for (const who of ['carol', 'dave']) {
      const res = await request(`http://127.0.0.1:${gateway.port}/global/a`, { headers: { 'x-api-key': `${who}-key` }, dispatcher: agent });
      await res.body.dump();
      statuses[who]!.push(res.statusCode);
    }
  }
  // global-limit: 5 per consumer; the requests alternate, so each bucket key differs from the one before.
  t.same(statuses.carol, [200, 200, 200, 200, 200, 429, 429], 'carol: 5');
  t.same(statuses.dave, [200, 200, 200, 200, 200, 429, 429], 'dave: 5, not what carol left');
});
