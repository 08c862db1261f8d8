// The health report's `workers` field: how many workers serve and with which table version, so an
// operator sees a missing worker or one stuck on an old table (status stays latched at 200).
import t from 'tap';
import type { WorkersHealth } from '../../src/builtins/healthcheck.js';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

const upstream = await startUpstream(t, { name: 'one' });
const config = (paths: string[]): Record<string, unknown> =>
  testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: paths.map((path) => ({ method: 'GET', path })) }]);
const gateway = await startGateway(t, { config: config(['/a']), waitFor: (line) => line.msg === 'gateway operational' });

async function workers(): Promise<{ status: number; workers: WorkersHealth }> {
  const res = await httpRequest(gateway.port, '/healthcheck');
  return { status: res.status, workers: (JSON.parse(res.body) as { workers: WorkersHealth }).workers };
}

/** The report once every slot serves the newest table (at least `version`). */
function allCurrent(version = 0): Promise<WorkersHealth> {
  return eventually(
    async () => {
      const { workers: w } = await workers();
      const current = w.tableVersion !== null && w.tableVersion >= version && w.serving === w.expected;
      return current && w.slots.every((s) => s.pid !== null && s.tableVersion === w.tableVersion) ? w : undefined;
    },
    10_000,
    20,
    'every slot serving the newest table',
  );
}

const startedPids = (): number[] => gateway.lines.filter((l) => l.msg === 'worker started').map((l) => Number(l.workerPid));

t.test('at start: two slots, each with its worker and the current table', async (t) => {
  const w = await allCurrent();
  t.equal(w.expected, 2);
  t.equal(w.serving, 2);
  t.type(w.tableVersion, 'number');
  t.same(w.slots.map((s) => s.slot), [0, 1]);
  t.same(w.slots.map((s) => s.pid).sort(), startedPids().sort(), 'the pids of the workers the primary started');
});

t.test('a killed worker shows as missing until its replacement serves', async (t) => {
  const before = await allCurrent();
  const victim = before.slots[1]!.pid!;
  const started = gateway.waitForLog((l) => l.msg === 'worker started' && Number(l.workerPid) !== before.slots[0]!.pid && Number(l.workerPid) !== victim, 10_000, 'the replacement');
  process.kill(victim, 'SIGKILL');
  // Hold the replacement before it can report ready, so the gap is observed, not raced.
  const replacement = Number((await started).workerPid);
  process.kill(replacement, 'SIGSTOP');
  t.teardown(() => {
    try {
      process.kill(replacement, 'SIGCONT');
    } catch {
      // gone
    }
  });

  const missing = await eventually(
    async () => {
      const report = await workers();
      return report.workers.slots[1]!.pid !== victim ? report : undefined;
    },
    5000,
    20,
    'the killed worker gone from the report',
  );
  t.equal(missing.status, 200, 'the status stays latched');
  t.equal(missing.workers.expected, 2);
  t.equal(missing.workers.serving, 1, 'one worker serves');
  t.same(missing.workers.slots[0], before.slots[0], 'the other slot is unchanged');
  t.equal(missing.workers.slots[1]!.tableVersion, null, 'the slot serves no table');
  t.ok(missing.workers.slots[1]!.pid === null || missing.workers.slots[1]!.pid === replacement, 'the slot is empty or holds the replacement, still starting');

  process.kill(replacement, 'SIGCONT');
  const after = await allCurrent();
  t.equal(after.serving, 2);
  t.same(after.slots.map((s) => s.pid), [before.slots[0]!.pid, replacement], 'the replacement serves in the slot');
  t.equal(after.slots[1]!.tableVersion, after.tableVersion, 'with the newest table');
});

t.test('after a reload every slot reports the new table version', async (t) => {
  const before = await allCurrent();
  gateway.writeConfig(config(['/a', '/b']));
  gateway.signal('SIGHUP');
  const reloaded = await gateway.waitForLog((l) => l.msg === 'config reloaded' && Number(l.tableVersion) > before.tableVersion!, 10_000, 'the reload');
  const after = await allCurrent(Number(reloaded.tableVersion));
  t.ok(after.tableVersion! > before.tableVersion!, `table ${before.tableVersion} → ${after.tableVersion}`);
  t.same(after.slots.map((s) => s.tableVersion), [after.tableVersion, after.tableVersion]);
  t.same(after.slots.map((s) => s.pid), before.slots.map((s) => s.pid), 'a route change keeps the workers');
});
