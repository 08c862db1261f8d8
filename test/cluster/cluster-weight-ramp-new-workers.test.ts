// A weight change ramps on every worker (docs/reference/forward.md#weights), workers started during
// the ramp included: a reload that also changes a worker-start setting replaces every worker, and a
// worker that dies is replaced. Each new worker used to start its balancer at the new weight (the
// whole change at once); the primary now sends the ramp with the table, and a new worker takes it up
// where it is. The ramp here is long (5 steps of a minute): through the test it is at its first step,
// the old split.
import t from 'tap';
import { httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { reloadWith } from '../helpers/reload.js';

const light = await startUpstream(t, { name: 'light' });
const heavy = await startUpstream(t, { name: 'heavy' });
const config = (weight: number, upstreamMs: number) =>
  testConfig(
    [
      { serviceType: 'static', serviceLocation: light.location, weight: 1, endpoints: [{ method: 'GET', path: '/w' }] },
      { serviceType: 'static', serviceLocation: heavy.location, weight, endpoints: [{ method: 'GET', path: '/w' }] },
    ],
    { upstreamWeighting: { stepCount: 5, stepDurationMs: 60_000 }, accessLog: { enabled: false }, timeouts: { upstreamMs: upstreamMs } },
  );
const gateway = await startGateway(t, { config: config(1, 30_000), waitFor: (line) => line.msg === 'gateway operational' });

/** The heavy upstream's share of `n` requests on fresh connections (both workers serve). */
async function heavyShare(n: number): Promise<{ share: number }> {
  let heavyAnswers = 0;
  for (let i = 0; i < n; i++) {
    const res = await httpRequest(gateway.port, '/w');
    if (res.status !== 200) throw new Error(`status ${res.status}`);
    if ((JSON.parse(res.body) as { upstream: string }).upstream === 'heavy') heavyAnswers++;
  }
  return { share: heavyAnswers / n };
}

t.test('workers that replace the old ones during a ramp serve the ramp, not the new weight at once', async (t) => {
  const before = await heavyShare(60);
  t.ok(Math.abs(before.share - 0.5) < 0.1, `1:1 before (${before.share.toFixed(2)})`);
  const started = gateway.lines.filter((l) => l.msg === 'worker started').length;
  // Weight 1 → 9 with another upstreamMs: a worker-start setting, so every worker is replaced.
  const status = await reloadWith(gateway, config(9, 25_000), { timeoutMs: 30_000 });
  t.equal(status.ok, true, 'reloaded');
  await gateway.waitForLog(() => gateway.lines.filter((l) => l.msg === 'worker started').length >= started + 2, 30_000, 'two new workers');
  // The old workers hand over and stop: from then on only the new ones serve.
  await gateway.waitForLog(() => gateway.lines.filter((l) => l.msg === 'worker stopped').length >= 2, 30_000, 'the old workers stopped');
  const after = await heavyShare(100);
  // At once, 9:1 would give 0.9.
  t.ok(after.share < 0.65, `still the old split at the ramp's first step (${after.share.toFixed(2)}; 0.90 if the new weight applied at once)`);
});
