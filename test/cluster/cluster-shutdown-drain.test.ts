// timeouts.shutdownDrainMs (docs/reference/processes.md#shutdown): after SIGTERM, /healthcheck answers
// 503 saying the gateway is shutting down while new and open connections are served as before; only
// when the drain ends are new connections refused. A second SIGTERM skips the rest of the drain. A
// SIGTERM to every process (systemctl stop) drains the same way: the workers do not stop accepting first.
// A worker signalled alone serves on through the drain too, and stops at a second signal.
import t from 'tap';
import { tryConnect } from '../helpers/raw-http.js';
import { eventually, httpRequest, openWorkerConnection, startGateway, startUpstream, testConfig, type GatewayProcess, type Teardown } from '../helpers/gateway-process.js';

const DRAIN_MS = 4000;

async function drainingGateway(t: Teardown, drainMs: number): Promise<GatewayProcess> {
  const upstream = await startUpstream(t, {
    name: 'backend',
    handle: (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ path: req.url }));
    },
  });
  const config = testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }]);
  return startGateway(t, {
    config: { ...config, timeouts: { ...(config.timeouts as object), shutdownDrainMs: drainMs } },
    waitFor: (line) => line.msg === 'gateway operational',
  });
}

/** Resolves with the first /healthcheck answered 503 on a new connection. */
function until503(gateway: GatewayProcess): Promise<{ status: number; body: string }> {
  return eventually(
    async () => {
      const res = await httpRequest(gateway.port, '/healthcheck').catch(() => undefined);
      return res?.status === 503 ? res : undefined;
    },
    DRAIN_MS - 1000,
    20,
    '/healthcheck answering 503',
  );
}

t.test('SIGTERM with shutdownDrainMs: 503 on /healthcheck, everything else served, then the usual stop', async (t) => {
  const gateway = await drainingGateway(t, DRAIN_MS);
  t.equal((await httpRequest(gateway.port, '/healthcheck')).status, 200, 'healthy before the signal');
  const open = await openWorkerConnection(t, gateway.port);
  const signalledAt = Date.now();
  gateway.signal('SIGTERM');
  const health = await until503(gateway);
  t.match(JSON.parse(health.body), { shuttingDown: /SIGTERM: the gateway is shutting down/ }, 'the body says the gateway is shutting down');
  // Every worker says so: a few more new connections, spread over the workers by the kernel.
  for (let i = 0; i < 6; i++) t.equal((await httpRequest(gateway.port, '/healthcheck')).status, 503, `health check ${i} on a new connection: 503`);
  const routed = await httpRequest(gateway.port, '/items/new-connection');
  t.equal(routed.status, 200, 'a request on a new connection is still served');
  t.same(JSON.parse(routed.body), { path: '/items/new-connection' });
  const onOpen = await open.get('/items/open-connection');
  t.equal(onOpen.status, 200, 'and one on a connection opened before the signal');
  t.ok(Date.now() - signalledAt < DRAIN_MS, 'all within the drain');
  t.equal(gateway.child.exitCode, null, 'the gateway is still running');

  await eventually(async () => ((await tryConnect(gateway.port)) === 'ECONNREFUSED' ? true : undefined), DRAIN_MS + 10_000, 20, 'new connections refused');
  t.ok(Date.now() - signalledAt >= DRAIN_MS - 100, `new connections are refused only once the drain is over (${Date.now() - signalledAt} ms)`);
  t.same(await gateway.exited, { code: 0, signal: null }, 'the primary exits 0');
  t.ok(gateway.lines.some((l) => l.msg === 'gateway stopped'));
});

t.test('a second SIGTERM during the drain skips the rest of it', async (t) => {
  const LONG_DRAIN_MS = 120_000;
  const gateway = await drainingGateway(t, LONG_DRAIN_MS);
  gateway.signal('SIGTERM');
  await until503(gateway);
  const secondAt = Date.now();
  gateway.signal('SIGTERM');
  t.same(await gateway.exited, { code: 0, signal: null }, 'the primary exits 0');
  const tookMs = Date.now() - secondAt;
  t.ok(tookMs < 30_000, `it stopped soon after the second signal (${tookMs} ms; the drain is ${LONG_DRAIN_MS} ms)`);
  t.ok(gateway.lines.some((l) => l.msg === 'SIGTERM during the drain: the rest of it is skipped'), 'it says why');
});

t.test('SIGTERM to every process (systemctl stop): the workers serve on through the drain too', async (t) => {
  const gateway = await drainingGateway(t, DRAIN_MS);
  const started = (): number[] => gateway.lines.filter((l) => l.msg === 'worker started').map((l) => Number(l.workerPid));
  const workers = started();
  t.equal(workers.length, 2, 'two workers');
  const signalledAt = Date.now();
  gateway.signal('SIGTERM');
  for (const pid of workers) process.kill(pid, 'SIGTERM');
  // A new connection every few ms through the drain, as clients that have not left yet open them.
  const failures: string[] = [];
  let served = 0;
  while (Date.now() - signalledAt < DRAIN_MS - 1000) {
    const outcome = await httpRequest(gateway.port, `/items/${served}`).then(
      (res) => (res.status === 200 ? null : `status ${res.status}`),
      (err: NodeJS.ErrnoException) => err.code ?? err.message,
    );
    if (outcome === null) served++;
    else failures.push(outcome);
  }
  t.same(failures, [], `every request on a new connection was served during the drain (${served} served)`);
  t.equal((await httpRequest(gateway.port, '/healthcheck')).status, 503, '/healthcheck answers 503 meanwhile');
  t.same(started(), workers, 'by the workers that were signalled: none was replaced');
  t.same(await gateway.exited, { code: 0, signal: null }, 'the primary exits 0');
  t.ok(Date.now() - signalledAt >= DRAIN_MS - 100, 'after the drain');
  t.notOk(
    gateway.lines.some((l) => l.msg === 'worker outlived the shutdown grace; killing it'),
    'no worker had to be killed',
  );
});

t.test('SIGTERM to one worker only: it serves on through the drain; a second SIGTERM stops it at once', async (t) => {
  const gateway = await drainingGateway(t, 120_000);
  const connection = await openWorkerConnection(t, gateway.port);
  const pid = Number(connection.workerPid);
  process.kill(pid, 'SIGTERM');
  await gateway.waitForLog((l) => l.pid === pid && l.msg === 'worker draining: serving as before until the drain ends', 5000, 'the worker draining');
  const res = await connection.get('/items/during-drain');
  t.equal(res.status, 200, 'it still serves on its connection');
  t.equal((await httpRequest(gateway.port, '/healthcheck')).status, 200, 'the gateway stays healthy: only the primary turns /healthcheck 503');
  const secondAt = Date.now();
  process.kill(pid, 'SIGTERM');
  const exit = await gateway.waitForLog((l) => l.workerPid === pid && typeof l.code === 'number', 20_000, "the primary's line about the exit");
  t.equal(exit.code, 0, `it exited 0, ${Date.now() - secondAt} ms after the second signal (the drain is 120000 ms)`);
  await eventually(async () => (gateway.lines.filter((l) => l.msg === 'worker listening').length >= 3 ? true : undefined), 10_000, 50, 'a replacement listening');
});
