// rateLimit across a SIGHUP reload that changes its limit (docs/reference/rate-limit.md#reload), through the real
// gateway process and its local store: once an answer states the new policy, its RateLimit and
// Retry-After are the new policy's, not a denial the worker kept from the old one.
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

const upstream = await startUpstream(t, { name: 'app' });
const config = (limit: number) =>
  testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }], {
    middleware: [{ id: 'limit', type: 'rateLimit', limit, windowMs: 600_000 }],
  });
const gateway = await startGateway(t, { config: config(2), workers: 1, waitFor: (line) => line.msg === 'gateway operational', startTimeoutMs: 60_000 });

/** `RateLimit: "limit";r=<r>;t=<t>` as numbers. */
function rateLimit(value: unknown): { r: number; t: number } {
  const match = /;r=(\d+);t=(\d+)$/.exec(String(value));
  if (match === null) throw new Error(`no RateLimit field: ${String(value)}`);
  return { r: Number(match[1]), t: Number(match[2]) };
}

t.test('a limit raised by a reload: the next answers are the new policy\'s, headers consistent', async (t) => {
  const statuses = [];
  for (let i = 0; i < 3; i++) statuses.push(await httpRequest(gateway.port, '/items/1'));
  t.same(statuses.map((a) => a.status), [200, 200, 429]);
  t.ok(Number(statuses[2]!.headers['retry-after']) > 200, `2 per 10 min: a token every 300 s (Retry-After ${statuses[2]!.headers['retry-after']})`);

  gateway.writeConfig(config(1000));
  gateway.signal('SIGHUP');
  const answer = await eventually(
    async () => {
      const answer = await httpRequest(gateway.port, '/items/1');
      return String(answer.headers['ratelimit-policy']).includes('q=1000') ? answer : undefined;
    },
    10_000,
    100,
    'an answer under the new policy',
  );
  // 1000 per 600 s: a token every 0.6 s. The bucket keeps when it is full again (600 s after the two
  // requests): it is empty now, and the next token comes within a second.
  const state = rateLimit(answer.headers.ratelimit);
  t.ok(state.t <= 600, `t=${state.t}: no later than the bucket was full again before`);
  const tokens = Math.floor(((600 - state.t) * 1000) / 600);
  t.ok(Math.abs(state.r - tokens) <= 2, `r=${state.r} is what t=${state.t} leaves under q=1000;w=600 (about ${tokens})`);
  if (answer.status === 429) t.ok(Number(answer.headers['retry-after']) <= 1, `Retry-After ${answer.headers['retry-after']}: under the new policy a token comes within 1 s`);
  const later = await eventually(
    async () => {
      const next = await httpRequest(gateway.port, '/items/1');
      return next.status === 200 ? next : undefined;
    },
    5000,
    200,
    'an admitted request',
  );
  t.equal(later.status, 200, 'admitted within seconds, not after the old policy\'s 300 s');
});
