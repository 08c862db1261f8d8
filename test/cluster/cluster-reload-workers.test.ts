// docs/reference/processes.md#reload-sighup: a reload that replaces the workers (it changes a setting read at worker start) whose
// new workers cannot start. A successor that exits, or does not report ready in time, is treated as
// failed: the old workers keep serving (no request fails), the reload is rolled back and recorded as
// `applied: false` with the reason, and the primary takes the next SIGHUP.
//
// GATEWAY_TEST_WORKER_START_FAULT (test-only, see src/cluster/worker.ts) makes a worker whose first
// config has the given `name` exit at start (`exit:`) or never report ready (`hang:`).
import t, { type Test } from 'tap';
import type { ReloadStatus, WorkersHealth } from '../../src/builtins/healthcheck.js';
import { SUCCESSOR_READY_TIMEOUT_MS } from '../../src/cluster/supervisor.js';
import { askWorker, eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { reloadWith } from '../helpers/reload.js';
import { migratesQueuedConnections } from '../helpers/kernel-settings.js';

const upstream = await startUpstream(t, { name: 'keep' });
const config = (name: string, paths: string[]): Record<string, unknown> => ({
  ...testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: paths.map((path) => ({ method: 'GET', path })) }]),
  name,
});
const gateway = await startGateway(t, {
  config: config('specgate', ['/old/{id}']),
  env: { GATEWAY_TEST_WORKER_START_FAULT: 'exit:crashy,hang:stuck' },
  waitFor: (line) => line.msg === 'gateway operational',
});

interface Health {
  workers: WorkersHealth;
  reload?: ReloadStatus;
}

async function health(): Promise<Health> {
  return JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body) as Health;
}

/** Requests on fresh connections until `stop()`: every one must be answered 200 by the upstream. */
function trafficLoop(): { stop: () => Promise<{ total: number; failures: string[] }> } {
  let running = true;
  const failures: string[] = [];
  let total = 0;
  const loop = (async () => {
    for (let i = 0; running; i++) {
      try {
        const res = await httpRequest(gateway.port, `/old/${i}`);
        total++;
        if (res.status !== 200) failures.push(`status ${res.status}`);
      } catch (err) {
        failures.push((err as Error).message);
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return { total, failures };
    },
  };
}

/** The pids that answer on fresh connections (both workers, once each has been seen). */
async function servingPids(): Promise<Set<string>> {
  const pids = new Set<string>();
  await eventually(
    async () => {
      pids.add((await askWorker(gateway.port, '/healthcheck')).workerPid);
      return pids.size >= 2 ? true : undefined;
    },
    5000,
    10,
    'both workers answering',
  );
  return pids;
}

/** Every slot serves, with the newest table. */
async function settledWorkers(): Promise<WorkersHealth> {
  return eventually(
    async () => {
      const { workers } = await health();
      const current = workers.serving === workers.expected && workers.slots.every((s) => s.tableVersion === workers.tableVersion);
      return current ? workers : undefined;
    },
    5000,
    20,
    'every worker serving the newest table',
  );
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The old routes still answer, the reload's new route does not: the previous table serves on both workers. */
async function previousTableServes(t: Test): Promise<void> {
  const seen = new Set<string>();
  await eventually(
    async () => {
      const old = await askWorker(gateway.port, '/old/1');
      const added = await askWorker(gateway.port, '/new/1');
      t.equal(old.status, 200, `/old/1 on worker ${old.workerPid}`);
      t.equal(added.status, 404, `/new/1 (the failed reload's route) on worker ${added.workerPid}`);
      seen.add(old.workerPid).add(added.workerPid);
      return seen.size >= 2 ? true : undefined;
    },
    5000,
    10,
    'both workers answering with the previous table',
  );
}

t.test('a successor that exits at start: the old workers keep serving, the reload is not applied', async (t) => {
  const pidsBefore = await servingPids();
  const versionBefore = (await settledWorkers()).tableVersion!;
  const traffic = trafficLoop();
  const status = await reloadWith(gateway, config('crashy', ['/old/{id}', '/new/{id}']));
  const { total, failures } = await traffic.stop();

  t.match(status, { ok: false, applied: false, error: /workers could not be replaced: the new worker of slot 0 exited with code 1 before it was ready/ });
  t.ok(total > 0, `${total} requests during the reload`);
  t.same(failures, [], 'no request failed');
  await gateway.waitForLog((l) => /config reload failed, the current config keeps serving/.test(String(l.msg)), 5000, 'the failure logged');
  t.equal(gateway.lines.filter((l) => /the successor exited with code 1 before it was ready/.test(String(l.msg))).length, 1, 'one successor tried, the other slot left alone');
  t.notOk(gateway.lines.some((l) => l.msg === 'replaced worker retired'), 'no old worker was retired');

  t.same(await servingPids(), pidsBefore, 'the same two workers serve');
  await previousTableServes(t);
  const workers = await settledWorkers();
  t.same(new Set(workers.slots.map((s) => String(s.pid))), pidsBefore);
  t.ok(workers.tableVersion! > versionBefore, 'the previous state was published again after the new table');
  t.equal(status.version, workers.tableVersion, 'the reload status names the table serving afterwards');
});

t.test('a successor that never reports ready is killed after the bound; the primary takes the next SIGHUP', async (t) => {
  const pidsBefore = await servingPids();
  const traffic = trafficLoop();
  const status = await reloadWith(gateway, config('stuck', ['/old/{id}', '/new/{id}']), { timeoutMs: SUCCESSOR_READY_TIMEOUT_MS + 10_000 });
  const { total, failures } = await traffic.stop();

  t.match(status, { ok: false, applied: false, error: new RegExp(`the new worker of slot 0 did not report ready within ${SUCCESSOR_READY_TIMEOUT_MS} ms`) });
  t.ok(total > 0, `${total} requests during the reload`);
  t.same(failures, [], 'no request failed');
  const stuck = gateway.lines.filter((l) => l.msg === 'worker started' && l.slot === 0).at(-1)!;
  t.notOk(pidsBefore.has(String(stuck.workerPid)), 'the last worker started is the stuck successor');
  await eventually(async () => (alive(Number(stuck.workerPid)) ? undefined : true), 5000, 20, 'the stuck successor gone');
  t.same(await servingPids(), pidsBefore, 'the same two workers serve');
  await previousTableServes(t);

  const refused = await reloadWith(gateway, '{ "upstreams": [ }');
  t.match(refused, { ok: false, applied: false, error: /invalid JSON/ }, 'the next SIGHUP is taken');
});

t.test('a reload whose workers start is applied: new workers in every slot, on the newest table', async (t) => {
  const pidsBefore = await servingPids();
  const traffic = trafficLoop();
  const status = await reloadWith(gateway, config('renamed', ['/old/{id}', '/new/{id}']), { timeoutMs: 20_000 });
  const { total, failures } = await traffic.stop();
  t.match(status, { ok: true, applied: true });
  t.ok(total > 0, `${total} requests during the reload`);
  if (migratesQueuedConnections()) {
    t.same(failures, [], 'no request failed (net.ipv4.tcp_migrate_req=1: a retiring worker hands its queued connections on)');
  } else {
    // net.ipv4.tcp_migrate_req=0 (the kernel default): Linux resets the connections still queued on a
    // SO_REUSEPORT listener that closes (native-notes.md). Such a connection's handshake may already have
    // completed, so the client sees a reset on connect, on read or on write, before any byte of answer.
    // That is all the setting allows: never an answer other than the upstream's 200, and most requests served.
    const reset = /^(connect|read|write) (ECONNRESET|EPIPE)\b|^socket hang up$/;
    t.same(failures.filter((f) => !reset.test(f)), [], `only connections reset before an answer: ${failures.join('; ')}`);
    t.ok(failures.length < total / 2, `most requests served (${total - failures.length} of ${total})`);
  }
  const workers = await settledWorkers();
  t.equal(workers.tableVersion, status.version);
  for (const slot of workers.slots) t.notOk(pidsBefore.has(String(slot.pid)), `slot ${slot.slot} runs a new worker`);
  const answer = await httpRequest(gateway.port, '/new/1');
  t.equal(answer.status, 200);
  t.equal(answer.headers.via, '1.1 renamed', 'the new workers use the new name');
});

t.test('SIGTERM while a successor is starting: the gateway exits 0 within the grace, leaving no process behind', async (t) => {
  const startedBefore = gateway.lines.filter((l) => l.msg === 'worker started').length;
  gateway.writeConfig(config('stuck', ['/old/{id}']));
  gateway.signal('SIGHUP');
  const successor = await gateway.waitForLog(
    (l) => l.msg === 'worker started' && gateway.lines.filter((x) => x.msg === 'worker started').indexOf(l) >= startedBefore,
    10_000,
    'the successor started',
  );
  // Stuck in its start: it has said hello and been handed the table (a message now would wait its turn).
  await gateway.waitForLog((l) => Number(l.pid) === Number(successor.workerPid) && /GATEWAY_TEST_WORKER_START_FAULT/.test(String(l.msg)), 10_000, 'the successor stuck');
  const pids = [...(await servingPids())].map(Number);
  const linesBefore = gateway.lines.length;
  gateway.signal('SIGTERM');
  const exit = await gateway.exited;
  t.same(exit, { code: 0, signal: null });
  const after = gateway.lines.slice(linesBefore);
  t.notOk(
    after.some((l) => l.msg === 'worker outlived the shutdown grace; killing it'),
    'not held by the stuck successor: it was stopped at once, not killed when the grace ran out',
  );
  t.notOk(after.some((l) => l.msg === 'config reloaded' || /config reload failed/.test(String(l.msg))), 'the interrupted reload recorded nothing');
  for (const pid of [...pids, Number(successor.workerPid)]) t.notOk(alive(pid), `process ${pid} is gone`);
});
