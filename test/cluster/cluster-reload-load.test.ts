// 20 SIGHUPs alternating two valid configs under steady load at about half of what the gateway can
// do here: no request fails, no connection errors, and once both workers have acknowledged a reload's
// table (the health report's workers field), every request on either worker routes by it: its
// config's own route answers, the other config's is gone. Configs A and B differ only in upstreams,
// so workers are never replaced: every reload is a table swap between requests.
import { createRequire } from 'node:module';
import t from 'tap';
import type { WorkersHealth } from '../../src/builtins/healthcheck.js';
import { askWorker, eventually, httpRequest, startGateway, startUpstream, swaggerDoc, testConfig } from '../helpers/gateway-process.js';

interface AutocannonResult {
  requests: { total: number; sent: number; average: number };
  errors: number;
  timeouts: number;
  resets: number;
  non2xx: number;
  statusCodeStats: Record<string, { count: number }>;
}
interface AutocannonRun extends PromiseLike<AutocannonResult> {
  stop(): void;
}
const autocannon = createRequire(import.meta.url)('autocannon') as (options: Record<string, unknown>) => AutocannonRun;

const RELOADS = 20;
/** A reload's table reaches both workers in tens of ms; this leaves room for the probes after it. */
const RELOAD_EVERY_MS = 600;
/** A generous bound on a reload reaching both workers (under this load it takes tens of ms). */
const ACKNOWLEDGED_WITHIN_MS = 5000;
/** Fresh connections land on either worker at random: 40 probes miss one of two with odds 2^-39. */
const PROBES = 40;

const one = await startUpstream(t, { name: 'one', spec: swaggerDoc('one', { '/a/{x}': ['GET'], '/shared': ['GET'] }) });
const two = await startUpstream(t, { name: 'two', spec: swaggerDoc('two', { '/b/{x}': ['GET'], '/shared': ['GET'] }) });
// No access log: at this rate its lines would cost the test process more than the gateway.
const settings = { accessLog: { enabled: false } };
const configs = [
  { name: 'A', route: '/a/1', gone: '/b/1', config: testConfig([{ serviceType: 'swagger2', serviceLocation: one.location }], settings) },
  { name: 'B', route: '/b/1', gone: '/a/1', config: testConfig([{ serviceType: 'swagger2', serviceLocation: two.location }], settings) },
];

const gateway = await startGateway(t, { config: configs[0]!.config, waitFor: (line) => line.msg === 'gateway operational' });
const url = `http://127.0.0.1:${gateway.port}/shared`;

t.test(`${RELOADS} SIGHUPs under steady load`, async (t) => {
  // From the health report, not the workers' log lines: those may reach this process after the
  // primary's 'gateway operational' when the machine is busy.
  const startHealth = JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body) as { workers: WorkersHealth };
  const workerPids = new Set(startHealth.workers.slots.map((slot) => String(slot.pid)));
  t.equal(workerPids.size, 2);

  const peak = await autocannon({ url, connections: 16, duration: 2 });
  t.equal(peak.non2xx + peak.errors, 0, 'the peak measurement itself is clean');
  const rate = Math.max(200, Math.round(peak.requests.average / 2));
  t.comment(`peak ${Math.round(peak.requests.average)} req/s through the gateway; steady load at ${rate} req/s`);

  const sharedServed = (): number => (one.seen.get('GET /shared') ?? 0) + (two.seen.get('GET /shared') ?? 0);
  const servedBefore = sharedServed();
  const load = autocannon({ url, connections: 8, overallRate: rate, duration: 120, timeout: 5 });
  let loadResult: AutocannonResult | null = null;
  t.teardown(async () => {
    if (loadResult) return;
    load.stop();
    await load;
  });
  await new Promise((resolve) => setTimeout(resolve, 500));

  const answeredAfterMs: number[] = [];
  for (let i = 1; i <= RELOADS; i++) {
    const next = configs[i % 2]!;
    gateway.writeConfig(next.config);
    const signalledAt = Date.now();
    gateway.signal('SIGHUP');

    // The reload's table, acknowledged by every worker (each reports the version it serves with).
    const reloaded = await gateway.waitForLog(
      (l) => l.msg === 'config reloaded' && gateway.lines.filter((x) => x.msg === 'config reloaded').indexOf(l) === i - 1,
      ACKNOWLEDGED_WITHIN_MS,
      `reload ${i}`,
    );
    await eventually(
      async () => {
        const { workers } = JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body) as { workers: WorkersHealth };
        return workers.slots.every((slot) => (slot.tableVersion ?? 0) >= Number(reloaded.tableVersion)) ? true : undefined;
      },
      ACKNOWLEDGED_WITHIN_MS,
      5,
      `reload ${i} acknowledged by both workers`,
    );
    const tookMs = Date.now() - signalledAt;
    answeredAfterMs.push(tookMs);
    // From then on no probe may miss: not one answer from the previous table, on either worker.
    const answeredBy = new Set<string>();
    const misses: string[] = [];
    for (let probe = 0; probe < PROBES && answeredBy.size < 2; probe++) {
      const answer = await askWorker(gateway.port, next.route);
      const gone = await askWorker(gateway.port, next.gone);
      if (answer.status !== 200) misses.push(`${next.route} ${answer.status} on ${answer.workerPid}`);
      if (gone.status !== 404) misses.push(`${next.gone} ${gone.status} on ${gone.workerPid}`);
      answeredBy.add(answer.workerPid);
    }
    t.same(misses, [], `reload ${i} (config ${next.name}): acknowledged after ${tookMs} ms; every probe since routes by it`);
    t.same([...answeredBy].sort(), [...workerPids].sort(), `reload ${i}: ${next.route} answered by both workers`);

    const wait = signalledAt + RELOAD_EVERY_MS - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }

  load.stop();
  loadResult = await load;
  const result = loadResult;
  t.comment(
    `load: ${result.requests.total} answered (${sharedServed() - servedBefore} reached the upstreams), non-2xx ${result.non2xx}, errors ${result.errors}, ` +
      `timeouts ${result.timeouts}, resets ${result.resets}; slowest config swap seen on both workers ${Math.max(...answeredAfterMs)} ms`,
  );
  t.ok(result.requests.total > (rate * RELOADS * RELOAD_EVERY_MS) / 1000 * 0.8, `steady load ran throughout (${result.requests.total} requests)`);
  t.equal(result.non2xx, 0, 'no non-2xx response');
  t.equal(result.errors, 0, 'no socket error');
  t.equal(result.timeouts, 0, 'no timeout');
  t.equal(result.resets, 0, 'no reset');
  t.same(Object.keys(result.statusCodeStats), ['200']);

  t.equal(gateway.lines.filter((l) => l.msg === 'config reloaded').length, RELOADS, 'every SIGHUP was a reload of its own');
  t.equal(gateway.lines.filter((l) => l.msg === 'worker started').length, 2, 'no worker was replaced');
  const metrics = JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as { lastReload: { ok: boolean; applied: boolean } };
  t.match(metrics.lastReload, { ok: true, applied: true });
  // autocannon's `sent` starts with one rate's worth of requests per connection, and requests in
  // flight at stop() are abandoned uncounted: the upstreams' count is the honest one.
  t.ok(sharedServed() - servedBefore >= result.requests.total, 'every answered request came from an upstream');
});
