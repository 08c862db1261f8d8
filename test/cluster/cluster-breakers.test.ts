// docs/reference/forward.md#circuit-breakers, through the running gateway with 2 workers: a failing host's breaker opens after
// about hostFailures failures in all (not hostFailures per worker), on both workers, and /metrics shows it.
import t from 'tap';
import { askWorker, eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

const THRESHOLD = 10;

t.test('a host failing on both workers trips once the failures add up to the threshold', async (t) => {
  const failing = await startUpstream(t, {
    name: 'failing',
    handle: (_req, res) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end('down');
    },
  });
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: failing.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }], {
      circuitBreaker: { hostFailures: THRESHOLD, endpointFailures: 1000, resetMs: 60_000 },
      accessLog: { enabled: false },
    }),
    waitFor: (line) => line.msg === 'gateway operational',
  });

  // Each request on a fresh connection, so the kernel spreads them over both workers; 20 ms apart,
  // so that what is "in flight" is the reports' delay on a quiet machine and not the scheduler's on a
  // loaded one (back to back, a loaded run let 16 through).
  const statusByWorker = new Map<string, number[]>();
  for (let i = 0; i < 3 * THRESHOLD; i++) {
    const answer = await askWorker(gateway.port, `/items/${i}`);
    statusByWorker.set(answer.workerPid, [...(statusByWorker.get(answer.workerPid) ?? []), answer.status]);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const hits = failing.total();
  t.comment(`upstream hit ${hits} times; statuses by worker: ${JSON.stringify([...statusByWorker.values()])}`);
  const failuresPerWorker = [...statusByWorker.values()].map((statuses) => statuses.filter((s) => s === 500).length);
  t.equal(statusByWorker.size, 2, 'both workers served requests');
  t.ok(failuresPerWorker.every((n) => n > 0), `both workers saw failures (${failuresPerWorker})`);
  // Counting alone, each worker would let THRESHOLD failures through: up to 2 x THRESHOLD in all.
  t.ok(hits >= THRESHOLD && hits <= THRESHOLD + 4, `the upstream saw ${hits} requests: the threshold, give or take reports in flight`);
  for (const [pid, statuses] of statusByWorker) t.equal(statuses[statuses.length - 1], 503, `worker ${pid} answers 503 now`);

  const breakers = await eventually(
    async () => {
      const report = JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as { breakers?: Record<string, { state: string; failures: number }> };
      return report.breakers?.[failing.location]?.state === 'open' ? report.breakers : undefined;
    },
    5000,
  );
  t.ok(breakers[failing.location]!.failures >= THRESHOLD, `/metrics: open, ${breakers[failing.location]!.failures} failures summed`);
  const text = (await httpRequest(gateway.port, '/metrics', { headers: { accept: 'text/plain' } })).body;
  t.match(text, new RegExp(`gateway_circuit_breaker_open\\{upstream="${failing.location.replace(/[.]/g, '\\.')}",method="",route=""\\} 1`));
});
