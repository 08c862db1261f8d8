// docs/reference/processes.md#signals: a signal sent to a worker rather than the primary (`systemctl kill`
// signals every process of the unit, `pkill -f gateway` matches the workers too, a terminal hangup signals
// the process group). SIGUSR1 does nothing (and never opens Node's inspector), SIGHUP is ignored (the
// primary reloads), SIGTERM (and SIGQUIT) drains that worker, which the primary then replaces; SIGQUIT to
// the primary stops the gateway as SIGTERM does.
import { renameSync, readFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { eventually, openWorkerConnection, startGateway, startUpstream, testConfig, type LogLine } from '../helpers/gateway-process.js';
import { listeningPorts, processGone } from '../helpers/proc.js';
import { NO_INSPECTOR_SIGNAL, noInspectorSignalFlags } from '../../src/cluster/worker-signals.js';

const SLOW_MS = 1500;
const dir = mkdtempSync(join(tmpdir(), 'specgate-worker-signals-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const logFile = join(dir, 'access.log');

const arrivals: Array<() => void> = [];
const upstream = await startUpstream(t, {
  name: 'backend',
  handle: (req, res) => {
    const answer = (): void => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ path: req.url }));
    };
    if (req.url !== '/slow') return answer();
    arrivals.shift()?.();
    setTimeout(answer, SLOW_MS);
  },
});
const gateway = await startGateway(t, {
  config: testConfig(
    [{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/slow' }, { method: 'GET', path: '/items/{id}' }] }],
    { accessLog: { enabled: true, destination: logFile } },
  ),
  waitFor: (line) => line.msg === 'gateway operational',
});
const initialWorkers = gateway.lines.filter((l) => l.msg === 'worker started').map((l) => Number(l.workerPid));

/** Resolves once the upstream holds the next /slow request. */
function nextSlowArrival(): Promise<void> {
  return new Promise((resolve) => arrivals.push(resolve));
}

function readLines(path: string): LogLine[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as LogLine);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

t.test('SIGUSR1 to a worker: no inspector opens, the same process serves on, its log file is left as it is', async (t) => {
  const connection = await openWorkerConnection(t, gateway.port);
  const pid = Number(connection.workerPid);
  const portsBefore = listeningPorts(pid);
  t.ok(portsBefore.includes(gateway.port), `the worker listens on the gateway's port (${portsBefore.join(', ')})`);
  t.equal(
    readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(NO_INSPECTOR_SIGNAL),
    noInspectorSignalFlags().length > 0,
    `${NO_INSPECTOR_SIGNAL} on the command line exactly when this Node (${process.version}) takes it`,
  );
  renameSync(logFile, `${logFile}.1`);
  process.kill(pid, 'SIGUSR1');
  // An inspector opened by the signal says so on stderr within a few milliseconds.
  await sleep(500);
  t.notMatch(gateway.text(), /Debugger listening|inspector/i, 'no inspector was started');
  t.same(listeningPorts(pid), portsBefore, 'the worker listens on nothing new');
  const res = await connection.get('/items/after-usr1');
  t.equal(res.status, 200, 'the same worker answers on the same connection');
  const line = await eventually(
    async () => readLines(`${logFile}.1`).find((l) => l.path === '/items/after-usr1'),
    10_000,
    50,
    'the access line',
  );
  t.equal(line.pid, pid);
  t.notOk(existsSync(logFile), 'the worker kept writing to the renamed file (the reopen is the primary\'s SIGUSR1)');
  connection.close();
});

t.test('SIGHUP to a worker: its in-flight request completes with 200, the worker is not replaced', async (t) => {
  const connection = await openWorkerConnection(t, gateway.port);
  const pid = Number(connection.workerPid);
  const arrived = nextSlowArrival();
  const answer = connection.get('/slow');
  await arrived;
  process.kill(pid, 'SIGHUP');
  const res = await answer;
  t.equal(res.status, 200, 'the request in flight completes');
  t.same(JSON.parse(res.body.toString('utf8')), { path: '/slow' });
  await sleep(300);
  t.notOk(processGone(pid), 'the worker is still running');
  const health = await connection.get('/healthcheck');
  t.equal(health.headers['x-gateway-worker']?.[0], String(pid), 'and answers on the same connection');
  t.notOk(gateway.lines.some((l) => /killed by SIGHUP/.test(String(l.msg))), 'the primary saw no worker die');
  t.equal(gateway.lines.filter((l) => l.msg === 'worker started').length, 2, 'no worker was started since');
  t.notOk(gateway.lines.some((l) => typeof l.msg === 'string' && l.msg.startsWith('config reload')), 'the primary did not reload (it got no signal)');
  // The worker's line reaches this process through the pipe, maybe after the answers above on a busy host.
  const why = await gateway.waitForLog((l) => l.pid === pid && l.msg === 'SIGHUP ignored: a worker does not reload, the primary does', 5000, 'the worker saying why');
  t.ok(why, 'the worker says why nothing happened');
  connection.close();
});

t.test('SIGUSR2 (nginx\'s binary upgrade signal) to the primary and to a worker: ignored, nothing stops', async (t) => {
  const connection = await openWorkerConnection(t, gateway.port);
  const pid = Number(connection.workerPid);
  const ignored = (): LogLine[] => gateway.lines.filter((l) => l.msg === 'SIGUSR2 ignored: it has no meaning here');
  process.kill(pid, 'SIGUSR2');
  gateway.signal('SIGUSR2');
  // Each logs the signal once it has handled it; a busy host may take a while to run the handlers.
  await eventually(async () => (ignored().length >= 2 ? true : undefined), 5000, 20, 'both SIGUSR2 lines');
  await sleep(300);
  t.notOk(processGone(pid), 'the worker is still running');
  t.equal(gateway.child.exitCode, null, 'the primary too');
  const res = await connection.get('/items/2');
  t.equal(res.status, 200, 'and it serves on the same connection');
  t.same(ignored().map((l) => l.pid).sort(), [pid, gateway.child.pid].sort(), 'each says so, once');
  connection.close();
});

t.test('SIGTERM to a worker: it drains (its in-flight request completes with 200), exits, and is replaced', async (t) => {
  const connection = await openWorkerConnection(t, gateway.port);
  const pid = Number(connection.workerPid);
  const arrived = nextSlowArrival();
  const answer = connection.get('/slow');
  await arrived;
  const signalledAt = Date.now();
  process.kill(pid, 'SIGTERM');
  const res = await answer;
  t.equal(res.status, 200, 'the request in flight completes');
  t.ok(Date.now() - signalledAt >= SLOW_MS - 500, 'it was still in flight when the signal came');
  const stopping = await gateway.waitForLog((l) => l.pid === pid && l.msg?.startsWith('worker stopping') === true, 5000, 'the worker stopping');
  t.equal(stopping.reason, 'SIGTERM');
  await eventually(async () => (processGone(pid) ? true : undefined), 10_000, 50, 'the worker gone');
  const exit = await gateway.waitForLog((l) => l.workerPid === pid && typeof l.code === 'number', 5000, "the primary's line about the exit");
  t.equal(exit.code, 0, 'it exited 0');
  const replacement = await gateway.waitForLog((l) => l.msg === 'worker listening' && !initialWorkers.includes(Number(l.pid)), 10_000, 'a replacement listening');
  t.ok(replacement.pid !== pid, 'a new worker serves in its place');
});

t.test('SIGQUIT (nginx\'s graceful stop) to a worker: it drains as at SIGTERM (its in-flight request completes with 200) and is replaced', async (t) => {
  const connection = await openWorkerConnection(t, gateway.port);
  const pid = Number(connection.workerPid);
  const arrived = nextSlowArrival();
  const answer = connection.get('/slow');
  await arrived;
  process.kill(pid, 'SIGQUIT');
  const res = await answer;
  t.equal(res.status, 200, 'the request in flight completes');
  const stopping = await gateway.waitForLog((l) => l.pid === pid && l.msg?.startsWith('worker stopping') === true, 5000, 'the worker stopping');
  t.equal(stopping.reason, 'SIGQUIT');
  const exit = await gateway.waitForLog((l) => l.workerPid === pid && typeof l.code === 'number', 10_000, "the primary's line about the exit");
  t.equal(exit.code, 0, 'it exited 0, not killed by the signal');
  await gateway.waitForLog((l) => l.msg === 'worker listening' && !initialWorkers.includes(Number(l.pid)) && Number(l.pid) !== pid, 10_000, 'a replacement listening');
});

// Last: it stops the gateway.
t.test('SIGQUIT to the primary: the gateway stops as at SIGTERM (the in-flight request completes with 200), exit 0', async (t) => {
  const connection = await openWorkerConnection(t, gateway.port);
  const arrived = nextSlowArrival();
  const answer = connection.get('/slow');
  await arrived;
  gateway.signal('SIGQUIT');
  const res = await answer;
  t.equal(res.status, 200, 'the request in flight completes');
  t.same(await gateway.exited, { code: 0, signal: null }, 'the primary exits 0');
  t.ok(gateway.lines.some((l) => l.msg?.startsWith('shutting down') === true && l.signal === 'SIGQUIT'), 'it says it is shutting down, and why');
  t.ok(gateway.lines.some((l) => l.msg === 'gateway stopped'));
});
