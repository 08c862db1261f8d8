// A weight change arriving by SIGHUP moves linearly over upstreamWeighting.stepCount steps of
// stepDurationMs (docs/reference/forward.md#weights), on every worker: not at once. The step timing itself (which
// share in which step) is checked against an injected clock in test/proxy/balancer.test.ts ("weight
// transition"); this real-process check asserts order, not time windows: in the order the answers
// came, the heavy upstream's share starts at the old split, passes through values in between, never
// goes back, and ends at the new split.
import t from 'tap';
import { httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

const STEPS = 3;
const STEP_MS = 1500;

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

/**
 * Requests on fresh connections (so both workers serve) from three concurrent loops, each answer
 * handed to `take` (true: the heavy upstream) in the order it came, until `take` returns false.
 */
async function sample(take: (heavy: boolean) => boolean): Promise<void> {
  let more = true;
  await Promise.all(
    Array.from({ length: 3 }, async () => {
      while (more) {
        const res = await httpRequest(gateway.port, '/w');
        if (res.status !== 200) throw new Error(`status ${res.status}`);
        if (more) more = take((JSON.parse(res.body) as { upstream: string }).upstream === 'heavy');
      }
    }),
  );
}

function share(samples: readonly boolean[]): number {
  return samples.filter(Boolean).length / samples.length;
}

/** Consecutive chunks of `size` answers (the last one may be shorter, and is dropped when tiny). */
function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  if (out.length > 1 && out.at(-1)!.length < size / 2) out.pop();
  return out;
}

const shareAt = (weight: number): number => weight / (weight + 1);

t.test('weight 1 → 5 moves in steps', async (t) => {
  const before: boolean[] = [];
  await sample((heavy) => before.push(heavy) < 150);
  t.ok(Math.abs(share(before) - 0.5) < 0.06, `equal weights share evenly before the reload (${share(before).toFixed(3)}, ${before.length} answers)`);

  gateway.writeConfig(withHeavyWeight(5));
  const compiledBefore = gateway.lines.filter((l) => l.msg === 'routing table compiled').length;
  gateway.signal('SIGHUP');
  await gateway.waitForLog(() => gateway.lines.filter((l) => l.msg === 'routing table compiled').length > compiledBefore, 5000, 'the reload compiled');
  // From here on the ramp runs; sample through it and well past its end (time only decides when to
  // stop: a late answer can only be further along the ramp, which the assertions allow).
  // A margin past the end absorbs the few ms between the compile and each worker's swap.
  const rampEnds = Date.now() + STEPS * STEP_MS + 250;
  const during: boolean[] = [];
  const after: boolean[] = [];
  await sample((heavy) => (Date.now() < rampEnds ? during.push(heavy) : after.push(heavy)) > 0 && after.length < 300);
  t.equal(gateway.lines.filter((l) => l.msg === 'worker started').length, 2, 'no worker was replaced: the balancers kept their state');

  const parts = chunks(during, 40).map(share);
  const target = shareAt(5);
  t.comment(`heavy share per 40 answers during the ramp: ${parts.map((s) => s.toFixed(2)).join(', ')}; after: ${share(after).toFixed(3)}`);
  t.ok(parts.length >= 4, `enough answers during the ramp (${during.length})`);
  t.ok(parts[0]! < target - 0.05, `not at once: the first answers are short of the new split (${parts[0]!.toFixed(3)})`);
  // A jump at once could leave one chunk straddling the swap in between; a ramp leaves many.
  const between = parts.filter((s) => s > shareAt(1) + 0.1 && s < target - 0.06);
  t.ok(between.length >= 2, `the share passes through values between the old and the new split (${between.length} chunks)`);
  // SWRR splits each run of answers almost exactly; 0.1 absorbs the two workers' interleaving.
  const backwards = parts.flatMap((s, i) => (i > 0 && s < parts[i - 1]! - 0.1 ? [`${parts[i - 1]!.toFixed(2)} → ${s.toFixed(2)}`] : []));
  t.same(backwards, [], 'the share never goes back');
  t.ok(Math.abs(share(after) - target) < 0.06, `after the ramp the new split holds (${share(after).toFixed(3)} ≈ ${target.toFixed(3)}, ${after.length} answers)`);
});
