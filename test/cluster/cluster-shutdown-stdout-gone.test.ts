// A gateway whose stdout reader has gone away (a log shipper that died) still stops on SIGTERM, at
// once and with every process: its log writes fail with EPIPE, and a process exiting with a line
// still pending must not wait on it. With pino's default asynchronous stdout, the workers hung in
// pino's exit handler until the primary killed them at the end of the grace period, and the primary
// could hang there for good (sonic-boom 4's flushSync retries EPIPE forever).
import t from 'tap';
import { startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

const GRACE_MS = 8000;

t.test('SIGTERM with stdout closed by its reader: every process exits well within the grace', async (t) => {
  const upstream = await startUpstream(t, { name: 'items' });
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }], {
      timeouts: { upstreamMs: 5000, connectMs: 1000, clientRequestMs: 10_000, shutdownGraceMs: GRACE_MS },
    }),
    waitFor: (line) => line.msg === 'gateway operational',
    workers: 2,
  });
  const workerPids = gateway.lines.filter((line) => line.msg === 'worker started').map((line) => Number(line.workerPid));
  t.equal(workerPids.length, 2, 'two workers started');
  // The reader goes away: every later write to the pipe fails with EPIPE.
  gateway.child.stdout!.destroy();
  gateway.child.stderr!.destroy();
  const started = Date.now();
  gateway.signal('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const exit = await Promise.race([gateway.exited, new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), GRACE_MS + 5000)))]);
  clearTimeout(timer);
  const tookMs = Date.now() - started;
  t.not(exit, null, `the primary exited (${tookMs} ms)`);
  t.equal(exit?.code, 0, 'with code 0');
  t.ok(tookMs < GRACE_MS / 2, `in ${tookMs} ms, not at the end of the ${GRACE_MS} ms grace`);
  const alive = workerPids.filter((pid) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  });
  t.same(alive, [], 'no worker is left');
});
