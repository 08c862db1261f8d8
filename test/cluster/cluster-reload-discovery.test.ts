// docs/reference/processes.md#reload-sighup: SIGHUPs during a slow initial discovery. A good SIGHUP followed quickly by one whose
// file is broken must not leave the slow upstream pending forever: once its doc arrives it is ready,
// routed on every worker, and the health check reaches 200.
import t from 'tap';
import {
  askWorker,
  eventually,
  httpRequest,
  startGateway,
  startUpstream,
  swaggerDoc,
  testConfig,
} from '../helpers/gateway-process.js';

interface Health {
  upstreams: Array<{ serviceLocation: string; state: string; endpoints: number }>;
}

t.test('good SIGHUP, then broken SIGHUP, during a slow initial discovery: the slow upstream is routed once its doc arrives', async (t) => {
  let release: () => void = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  const slow = await startUpstream(t, { name: 'slow', spec: swaggerDoc('slow', { '/slow/{id}': ['GET'] }), holdSpec: held });
  const fast = await startUpstream(t, { name: 'fast', spec: swaggerDoc('fast', { '/fast/{id}': ['GET'] }) });
  const config = testConfig(
    [
      { serviceType: 'swagger2', serviceLocation: slow.location },
      { serviceType: 'swagger2', serviceLocation: fast.location },
    ],
    // Long enough that the held doc never times out during the test.
    { discovery: { fetchTimeoutMs: 60_000, retries: 0, backoffMs: 100, refreshIntervalMs: 0 } },
  );
  const gateway = await startGateway(t, { config });
  await gateway.waitForLog((l) => l.msg === 'upstream discovered' && l.upstream === fast.location, 15_000, 'the fast upstream');
  t.equal((await httpRequest(gateway.port, '/healthcheck')).status, 503, 'the slow upstream holds readiness');

  gateway.signal('SIGHUP');
  await gateway.waitForLog((l) => l.msg === 'config reload: discovering new and changed upstreams', 10_000, 'the first reload');
  gateway.writeConfig('{ "upstreams": [ }');
  gateway.signal('SIGHUP');
  await gateway.waitForLog((l) => /config reload refused/.test(String(l.msg)), 10_000, 'the broken reload refused');

  const pending = JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body) as Health;
  t.equal(pending.upstreams.find((u) => u.serviceLocation === slow.location)?.state, 'pending', 'still waiting on its doc');

  release();
  const health = await eventually(
    async () => {
      const res = await httpRequest(gateway.port, '/healthcheck');
      return res.status === 200 ? (JSON.parse(res.body) as Health) : undefined;
    },
    10_000,
    50,
    'health 200 once the slow doc arrived',
  );
  t.same(
    health.upstreams.map((u) => [u.serviceLocation, u.state, u.endpoints]),
    [
      [slow.location, 'ready', 1],
      [fast.location, 'ready', 1],
    ],
  );
  const pids = new Set<string>();
  await eventually(
    async () => {
      const answer = await askWorker(gateway.port, '/slow/7');
      t.equal(answer.status, 200, `/slow/7 routed by worker ${answer.workerPid}`);
      t.equal((JSON.parse(answer.body) as { upstream: string }).upstream, 'slow');
      pids.add(answer.workerPid);
      return pids.size >= 2 ? true : undefined;
    },
    5000,
    10,
    '/slow/7 routed by both workers',
  );
});
