// docs/reference/processes.md#reload-sighup: a reload that changes timeouts.shutdownGraceMs replaces
// the workers, and the retiring worker drains with the new grace, the one it logs: raised, a request
// longer than the old grace completes; lowered, the request is cut at the new grace and the worker
// still stops on its own (its "worker stopped" line and the cut request's access-log line are there),
// rather than being ended mid-drain by its force-exit timer.
import t, { type Test } from 'tap';
import { httpRequest, startGateway, startUpstream, testConfig, type HttpResult, type LogLine } from '../helpers/gateway-process.js';
import { reloadWith } from '../helpers/reload.js';

/** Longer than the first grace and the lowered one, shorter than the raised one. */
const SLOW_MS = 4000;

const arrivals: Array<() => void> = [];
const upstream = await startUpstream(t, {
  name: 'backend',
  handle: (_req, res) => {
    arrivals.shift()?.();
    setTimeout(() => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"slow":true}');
    }, SLOW_MS);
  },
});
const config = (graceMs: number): Record<string, unknown> => {
  const base = testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/slow/{id}' }] }]);
  return { ...base, timeouts: { ...(base.timeouts as object), upstreamMs: 30_000, shutdownGraceMs: graceMs } };
};
const gateway = await startGateway(t, { config: config(1500), workers: 1, waitFor: (line) => line.msg === 'gateway operational' });

const workerPids = (): number[] => gateway.lines.filter((l) => l.msg === 'worker started').map((l) => Number(l.workerPid));
const byWorker = (pid: number, msg: string) => (line: LogLine) => line.pid === pid && line.msg === msg;

/** A slow request, once the upstream has it; then a reload to `graceMs`, which replaces the worker. */
async function slowRequestThenReload(t: Test, id: string, graceMs: number): Promise<{ worker: number; answer: Promise<HttpResult | Error> }> {
  const [worker] = workerPids().slice(-1);
  const arrived = new Promise<void>((resolve) => arrivals.push(resolve));
  const answer = httpRequest(gateway.port, `/slow/${id}`, { timeoutMs: 30_000 }).catch((err: Error) => err);
  await arrived;
  const status = await reloadWith(gateway, config(graceMs), { settled: (s) => s.applied !== undefined, timeoutMs: 30_000 });
  t.equal(status.ok, true, `the reload to grace ${graceMs} is applied`);
  return { worker: worker!, answer };
}

t.test('grace raised: the retiring worker waits the new grace for its request', async (t) => {
  const { worker, answer } = await slowRequestThenReload(t, 'raised', 9000);
  const stopping = await gateway.waitForLog(byWorker(worker, 'worker stopping: no new connections, finishing in-flight requests'), 20_000);
  t.equal(stopping.graceMs, 9000, 'the worker says it drains with the new grace');
  const result = await answer;
  t.notOk(result instanceof Error, `the request longer than the old grace (1500 ms) is answered: ${result instanceof Error ? result.message : ''}`);
  if (!(result instanceof Error)) t.same([result.status, result.body], [200, '{"slow":true}']);
  await gateway.waitForLog(byWorker(worker, 'worker stopped'), 20_000);
});

t.test('grace lowered: the request is cut at the new grace and the worker stops on its own', async (t) => {
  const { worker, answer } = await slowRequestThenReload(t, 'lowered', 1000);
  const stopping = await gateway.waitForLog(byWorker(worker, 'worker stopping: no new connections, finishing in-flight requests'), 20_000);
  t.equal(stopping.graceMs, 1000);
  t.ok((await answer) instanceof Error, 'the request outliving the new grace is cut');
  await gateway.waitForLog(byWorker(worker, 'worker stopped'), 20_000, "the retiring worker's 'worker stopped'");
  t.notOk(gateway.lines.some(byWorker(worker, 'in-flight requests outlived the grace; exiting anyway')), 'its force-exit timer did not end the drain');
  const line = gateway.accessLines().find((l) => l.pid === worker && l.path === '/slow/lowered');
  t.ok(line, 'the cut request has its access-log line');
});
