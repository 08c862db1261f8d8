// A config the workers could not build was accepted by the primary (`responseCache` maxEntryBytes over
// maxBytes): `gateway check` said ok, every worker crashed at start and was respawned for ever, and at a
// reload the primary said ok while the workers refused the table in their logs only. Now the primary
// refuses such a config by the same checks the workers run, and a table a worker still cannot apply (a
// failure of its own, injected here) is reported: the reload is not ok, and the worker serves on as it was.
import t from 'tap';
import type { ReloadStatus } from '../../src/builtins/healthcheck.js';
import { askWorker, eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { reloadWith } from '../helpers/reload.js';

const upstream = await startUpstream(t, { name: 'app' });
const endpoints = (...paths: string[]) => paths.map((path) => ({ method: 'GET', path }));
const good = testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: endpoints('/old/{id}') }], { accessLog: { enabled: false } });
const gateway = await startGateway(t, { config: good, env: { GATEWAY_TEST_WORKER_APPLY_FAULT: 'boom' }, waitFor: (line) => line.msg === 'gateway operational' });

/** The status names the failure of each of the two worker slots. */
function namesBothSlots(status: ReloadStatus): boolean {
  return [0, 1].every((slot) => (status.error ?? '').includes(`the worker of slot ${slot} (pid `));
}

/** Both workers answer `path` with `status`. */
async function onBothWorkers(path: string, status: number): Promise<void> {
  const pids = new Set<string>();
  await eventually(
    async () => {
      const answer = await askWorker(gateway.port, path);
      if (answer.status !== status) throw new Error(`${path}: ${answer.status} from worker ${answer.workerPid}`);
      pids.add(answer.workerPid);
      return pids.size >= 2 ? true : undefined;
    },
    5000,
    10,
    `${path} answering ${status} on both workers`,
  );
}

t.test('a cache entry larger than the cache is refused at reload, naming the field; the workers serve on', async (t) => {
  const status = await reloadWith(gateway, { ...good, middleware: [{ id: 'cache', type: 'responseCache', maxBytes: 10, maxEntryBytes: 100 }] });
  t.match(status, { ok: false, applied: false, error: /gateway\.json: \/middleware\/0\/maxEntryBytes: 100 is larger than maxBytes \(10\); no entry that large could be kept in the local store/ });
  await onBothWorkers('/old/1', 200);
  t.notOk(gateway.lines.some((line) => line.msg === 'could not apply the published table; the previous one keeps serving'), 'no worker was handed it');
  const health = JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body) as { workers: { serving: number; expected: number } };
  t.equal(health.workers.serving, health.workers.expected, 'no worker crashed');
});

t.test('a table the workers cannot apply: the reload is not ok, says why, and nothing of it serves', async (t) => {
  const next = {
    ...testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: endpoints('/old/{id}', '/new/{id}') }], { accessLog: { enabled: false } }),
    middleware: [{ id: 'boom', type: 'apiKeyAuth', keys: [] }],
  };
  // Each worker reports its own failure, and the primary adds each to the status as it comes: the
  // status is final once it names both slots (the health report below is compared with it).
  const status = await reloadWith(gateway, next, { settled: (s) => s.applied && !s.ok && namesBothSlots(s) });
  t.match(status, { ok: false, applied: true, error: /the worker of slot \d \(pid \d+\) could not apply table version \d+ and serves table version \d+: GATEWAY_TEST_WORKER_APPLY_FAULT/ });
  const failed = await gateway.waitForLog((line) => /could not apply table version/.test(String(line.msg)) && line.role === 'primary');
  t.equal(failed.level, 50, 'the primary logs it as an error');
  // Neither the new table nor the new middleware: the key check would answer 401.
  await onBothWorkers('/old/2', 200);
  await onBothWorkers('/new/1', 404);
  // The health report is pushed apart from /metrics (at once, or within 25 ms of the push before):
  // read once it carries that reload's status with both failures.
  const health = await eventually(
    async () => {
      const health = JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body) as { reload?: ReloadStatus; workers: { tableVersion: number; slots: Array<{ tableVersion: number }> } };
      return health.reload?.at === status.at && namesBothSlots(health.reload) ? health : undefined;
    },
    5000,
    50,
    "the reload's status with both failures in the health report",
  );
  t.same(health.reload, status, 'the health report says the same');
  t.ok(health.workers.slots.every((slot) => slot.tableVersion < health.workers.tableVersion), 'every slot is on the previous table');
});

t.test('the next good reload is ok again', async (t) => {
  const status = await reloadWith(gateway, { ...good, middleware: [{ id: 'auth', type: 'apiKeyAuth', keys: [] }] });
  t.match(status, { ok: true, applied: true });
  t.notOk('error' in status);
  await onBothWorkers('/old/3', 401);
});
