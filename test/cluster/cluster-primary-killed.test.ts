// docs/reference/processes.md#when-the-primary-dies: kill -9 of the primary with a slow request in flight.
// Its workers stop listening at once (the port is free for a new gateway), finish the request with 200,
// write its access line, and exit within timeouts.shutdownGraceMs.
import t from 'tap';
import { tryConnect } from '../helpers/raw-http.js';
import { eventually, openWorkerConnection, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { processGone } from '../helpers/proc.js';

const SLOW_MS = 1500;
const GRACE_MS = 5000;

t.test('kill -9 of the primary: the workers drain their in-flight requests, free the port and exit', async (t) => {
  let arrived: () => void = () => {};
  const slowArrived = new Promise<void>((resolve) => (arrived = resolve));
  const upstream = await startUpstream(t, {
    name: 'slow',
    handle: (req, res) => {
      arrived();
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ upstream: 'slow', done: true }));
      }, SLOW_MS);
    },
  });
  const config = testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/slow' }] }]);
  const gateway = await startGateway(t, {
    config: { ...config, timeouts: { ...(config.timeouts as object), shutdownGraceMs: GRACE_MS }, accessLog: { enabled: true, destination: 'stdout' } },
    waitFor: (line) => line.msg === 'gateway operational',
  });
  const workers = gateway.lines.filter((l) => l.msg === 'worker started').map((l) => Number(l.workerPid));
  t.equal(workers.length, 2);

  // The output pipes end once every process that holds them (the primary and its workers) has exited.
  const outputEnded = Promise.all([gateway.child.stdout!, gateway.child.stderr!].map((stream) => new Promise((resolve) => stream.once('end', resolve))));
  const connection = await openWorkerConnection(t, gateway.port);
  const answer = connection.get('/slow');
  await slowArrived;
  const killedAt = Date.now();
  process.kill(gateway.child.pid!, 'SIGKILL');
  t.same(await gateway.exited, { code: null, signal: 'SIGKILL' }, 'the primary is gone');

  // gateway.waitForLog gives up once the primary has exited: the workers' lines are polled for.
  for (const pid of workers) {
    const line = await eventually(
      async () => gateway.lines.find((l) => l.pid === pid && l.msg?.startsWith('worker stopping') === true),
      5000,
      20,
      `worker ${pid} stopping`,
    );
    t.equal(line.reason, 'primary disconnected', `worker ${pid} drains because its primary is gone`);
  }
  let finished = false;
  void answer.finally(() => (finished = true));
  // Polled for as long as a busy host may take; what is asserted is that it happened before the answer.
  const refused = await eventually(async () => ((await tryConnect(gateway.port)) === 'ECONNREFUSED' ? true : undefined), 5000, 20, 'the port refusing').catch(() => false);
  t.ok(refused, 'the port is free while the request is still in flight');
  t.notOk(finished, 'the request had not finished then');

  const res = await answer;
  t.equal(res.status, 200, 'the request in flight completes');
  t.same(JSON.parse(res.body.toString('utf8')), { upstream: 'slow', done: true });
  t.ok(Date.now() - killedAt >= SLOW_MS - 500, 'it was in flight when the primary died');

  await eventually(async () => (workers.every(processGone) ? true : undefined), GRACE_MS + 1000, 50, 'every worker gone within the grace');
  t.pass(`both workers exited ${Date.now() - killedAt} ms after the kill`);
  await outputEnded;
  const access = gateway.accessLines().find((l) => l.path === '/slow');
  t.equal(access?.status, 200, 'its access line was written before the worker exited');
  t.ok(
    workers.every((pid) => gateway.lines.some((l) => l.pid === pid && l.msg === 'worker stopped')),
    'each worker logs that it stopped',
  );
  t.equal(await tryConnect(gateway.port), 'ECONNREFUSED', 'nothing listens on the port');
});
