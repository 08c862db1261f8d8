// The templates the router refuses are logged per upstream when they change (the first time, and when
// the set differs), not at every compile: re-discoveries of other upstreams recompile the table.
import t from 'tap';
import { eventually, startGateway, startUpstream, swaggerDoc, testConfig, type LogLine, type UpstreamOptions } from '../helpers/gateway-process.js';

const REFRESH_MS = 250;

// startUpstream reads `spec` at every request: changing it changes what the upstream serves.
const badOptions: UpstreamOptions = { name: 'bad', spec: swaggerDoc('bad', { '/ok/{id}': ['GET'], '/broken/{x': ['GET'], '/also/{y': ['GET'] }) };
const bad = await startUpstream(t, badOptions);
const movingOptions: UpstreamOptions = { name: 'moving', spec: swaggerDoc('moving', { '/m/0': ['GET'] }) };
const moving = await startUpstream(t, movingOptions);

const gateway = await startGateway(t, {
  config: testConfig(
    [
      { serviceType: 'swagger2', serviceLocation: bad.location },
      { serviceType: 'swagger2', serviceLocation: moving.location },
    ],
    { discovery: { fetchTimeoutMs: 1000, retries: 0, backoffMs: 50, refreshIntervalMs: REFRESH_MS } },
  ),
  workers: 1,
  waitFor: (line) => line.msg === 'gateway operational',
});

const refusedOfBad = (): LogLine[] => gateway.lines.filter((l) => l.upstream === bad.location && typeof l.template === 'string' && l.level === 40);
const compiles = (): number => gateway.lines.filter((l) => l.msg === 'routing table compiled').length;

/** Changes the moving upstream's doc and waits for the table it makes to be compiled. */
async function recompile(step: number): Promise<void> {
  const before = compiles();
  movingOptions.spec = swaggerDoc('moving', { [`/m/${step}`]: ['GET'] });
  await eventually(async () => (compiles() > before ? true : undefined), 10_000, 50, `a compile after moving's doc changed (${step})`);
}

t.test('each refused template is logged once, however often the table is compiled again', async (t) => {
  await eventually(async () => (refusedOfBad().length >= 2 ? true : undefined), 10_000, 50, 'the refused templates logged');
  for (let step = 1; step <= 4; step++) await recompile(step);
  t.ok(compiles() >= 5, `${compiles()} compiles`);
  t.same(refusedOfBad().map((l) => l.template).sort(), ['/also/{y', '/broken/{x'], 'two warn lines, one per template');
});

t.test('a change in the set logs the upstream\'s refused templates again', async (t) => {
  badOptions.spec = swaggerDoc('bad', { '/ok/{id}': ['GET'], '/broken/{x': ['GET'], '/also/{y': ['GET'], '/third/{z': ['GET'] });
  await eventually(async () => (refusedOfBad().length >= 5 ? true : undefined), 10_000, 50, 'the new set logged');
  await recompile(5);
  t.same(refusedOfBad().slice(2).map((l) => l.template).sort(), ['/also/{y', '/broken/{x', '/third/{z'], 'the whole new set, once');

  badOptions.spec = swaggerDoc('bad', { '/ok/{id}': ['GET'] });
  const fixed = await gateway.waitForLog((l) => l.msg === 'upstream has no endpoint left out any more' && l.upstream === bad.location);
  t.equal(fixed.level, 30, 'the fix is said once, as info');
  await recompile(6);
  t.equal(refusedOfBad().length, 5, 'nothing more');
  t.equal(gateway.lines.filter((l) => l.msg === 'upstream has no endpoint left out any more').length, 1);
});
