// A weight change arriving by SIGHUP moves linearly over upstreamWeighting.stepCount steps of
// stepDurationMs (contract section 4), on every worker: not at once.
import t from 'tap';
import { httpRequest, startGateway, startUpstream, testConfig } from './helpers/gateway-process.js';

const STEPS = 4;
const STEP_MS = 750;

const light = await startUpstream(t, { name: 'light' });
const heavy = await startUpstream(t, { name: 'heavy' });
const withHeavyWeight = (weight: number) =>
  testConfig(
    [
      { serviceType: 'static', serviceLocation: light.location, weight: 1, endpoints: [{ method: 'GET', path: '/w' }] },
      { serviceType: 'static', serviceLocation: heavy.location, weight, endpoints: [{ method: 'GET', path: '/w' }] },
    ],
    { upstreamWeighting: { stepCount: STEPS, stepDurationMs: STEP_MS }, accessLog: { enabled: false } },
  );
const gateway = await startGateway(t, { config: withHeavyWeight(1), waitFor: (line) => line.msg === 'gateway operational' });

interface Sample {
  at: number;
  heavy: boolean;
}

/** Requests on fresh connections (so both workers serve) from `loops` concurrent loops, for `durationMs`. */
async function sample(durationMs: number, loops = 3): Promise<Sample[]> {
  const samples: Sample[] = [];
  const until = Date.now() + durationMs;
  await Promise.all(
    Array.from({ length: loops }, async () => {
      while (Date.now() < until) {
        const res = await httpRequest(gateway.port, '/w');
        if (res.status !== 200) throw new Error(`status ${res.status}`);
        samples.push({ at: Date.now(), heavy: (JSON.parse(res.body) as { upstream: string }).upstream === 'heavy' });
      }
    }),
  );
  return samples;
}

function share(samples: readonly Sample[]): number {
  return samples.filter((s) => s.heavy).length / samples.length;
}

t.test('weight 1 → 5 moves in steps', async (t) => {
  const before = share(await sample(600));
  t.ok(Math.abs(before - 0.5) < 0.06, `equal weights share evenly before the reload (${before.toFixed(3)})`);

  gateway.writeConfig(withHeavyWeight(5));
  const compiledBefore = gateway.lines.filter((l) => l.msg === 'routing table compiled').length;
  gateway.signal('SIGHUP');
  const sampling = sample(STEPS * STEP_MS + 900);
  await gateway.waitForLog(
    () => gateway.lines.filter((l) => l.msg === 'routing table compiled').length > compiledBefore,
    5000,
    'the reload compiled',
  );
  const samples = await sampling;
  // Workers apply the table within a few ms of its compilation.
  const startedAt = gateway.lines.filter((l) => l.msg === 'routing table compiled')[compiledBefore]!.time as number;
  t.equal(gateway.lines.filter((l) => l.msg === 'worker started').length, 2, 'no worker was replaced: the balancers kept their state');

  const shares: string[] = [];
  for (let step = 0; step <= STEPS; step++) {
    // Margins around each step boundary absorb the clock offset between the gateway and this process.
    const from = startedAt + step * STEP_MS + 100;
    const to = step === STEPS ? Infinity : startedAt + (step + 1) * STEP_MS - 100;
    const inStep = samples.filter((s) => s.at >= from && s.at < to);
    const weight = 1 + ((5 - 1) * step) / STEPS;
    const expected = weight / (weight + 1);
    const got = share(inStep);
    shares.push(`${got.toFixed(3)} (expected ${expected.toFixed(3)}, ${inStep.length} requests)`);
    t.ok(inStep.length >= 30, `step ${step}: enough requests (${inStep.length})`);
    t.ok(Math.abs(got - expected) < 0.07, `step ${step}: heavy weight ${weight}, share ${got.toFixed(3)} ≈ ${expected.toFixed(3)}`);
  }
  t.comment(`heavy share per step: ${shares.join(', ')}`);
});
