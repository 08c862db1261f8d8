// docs/reference/forward.md#circuit-breakers and docs/observability.md, through the running gateway with
// 2 workers and SIGHUP reloads: what /metrics shows of the breakers is what the workers hold now. A
// reload that removes an upstream whose breaker is open drops its series; one that adds it back
// (the workers start its breakers over and forward again) does not show it open.
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { closedPort } from '../helpers/raw-http.js';
import { reloadWith } from '../helpers/reload.js';

interface BreakersJson {
  breakers?: Record<string, { state: string; failures: number; endpoints: Record<string, { state: string }> }>;
}

t.test('a reload that removes an upstream drops its breakers from /metrics; one that adds it back shows them closed', async (t) => {
  const live = await startUpstream(t, { name: 'live' });
  const dead = `http://127.0.0.1:${await closedPort()}`;
  const liveUpstream = { serviceType: 'static', serviceLocation: live.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] };
  const deadUpstream = { serviceType: 'static', serviceLocation: dead, endpoints: [{ method: 'GET', path: '/dead/{id}' }] };
  // Only the host + endpoint breaker trips (as with the defaults, 25 against 50): the host's stays closed.
  const settings = { circuitBreaker: { hostFailures: 1000, endpointFailures: 3, resetMs: 60_000 }, accessLog: { enabled: false } };
  const withDead = testConfig([liveUpstream, deadUpstream], settings);
  const withoutDead = testConfig([liveUpstream], settings);
  const gateway = await startGateway(t, { config: withDead, waitFor: (line) => line.msg === 'gateway operational' });

  const prometheus = async () => (await httpRequest(gateway.port, '/metrics?format=prometheus')).body;
  const deadLines = (text: string) => text.split('\n').filter((line) => line.startsWith('gateway_circuit_breaker_') && line.includes(`upstream="${dead}"`));
  const breakers = async () => (JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as BreakersJson).breakers ?? {};

  for (let i = 0; i < 10; i++) await httpRequest(gateway.port, `/dead/${i}`);
  const open = await eventually(async () => {
    const lines = deadLines(await prometheus());
    return lines.includes(`gateway_circuit_breaker_open{upstream="${dead}",method="GET",route="/dead/{id}"} 1`) ? lines : undefined;
  }, 5000);
  t.ok(open.some((line) => line.startsWith(`gateway_circuit_breaker_open{upstream="${dead}",method="",route=""}`)), 'its host breaker is shown too');
  t.equal((await httpRequest(gateway.port, '/dead/1')).status, 503, 'the endpoint breaker is open in the worker');

  const removed = await reloadWith(gateway, withoutDead);
  t.ok(removed.ok, `reload without the dead upstream: ${JSON.stringify(removed)}`);
  await eventually(async () => (deadLines(await prometheus()).length === 0 ? true : undefined), 5000, 50, 'no breaker series of the removed upstream');
  t.notOk(dead in (await breakers()), 'nor in the JSON report');
  // A while later still (the report is not only late): nothing brings it back.
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.same(deadLines(await prometheus()), [], 'still gone 0.5 s later');
  t.equal((await httpRequest(gateway.port, '/items/1')).status, 200, 'the other upstream serves on');

  const added = await reloadWith(gateway, withDead);
  t.ok(added.ok, `reload adding it back: ${JSON.stringify(added)}`);
  t.equal((await httpRequest(gateway.port, '/dead/1')).status, 502, 'forwarded again (its breakers start over): 502, nothing listens');
  const after = await eventually(async () => {
    const lines = deadLines(await prometheus());
    return lines.some((line) => line.startsWith('gateway_circuit_breaker_failures')) ? lines : undefined;
  }, 5000);
  t.same(
    after.filter((line) => line.startsWith('gateway_circuit_breaker_open')),
    [`gateway_circuit_breaker_open{upstream="${dead}",method="",route=""} 0`],
    'the new failure is counted, and no breaker of it shows open',
  );
  t.same((await breakers())[dead]?.endpoints, {}, 'JSON: no endpoint breaker of it open');
});
