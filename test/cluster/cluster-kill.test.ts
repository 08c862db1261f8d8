// kill -9 of a worker under load: it is replaced, requests keep succeeding, /healthcheck stays 200.
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

const upstream = await startUpstream(t, { name: 'backend' });
const gateway = await startGateway(t, {
  config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/work/{id}' }] }]),
  waitFor: (line) => line.msg === 'gateway operational',
});

interface Outcome {
  at: number;
  ok: boolean;
  error?: string;
}

t.test('a killed worker is replaced while traffic keeps flowing', async (t) => {
  const started = gateway.lines.filter((l) => l.msg === 'worker started');
  t.equal(started.length, 2);
  const victim = Number(started[0]!.workerPid);

  const outcomes: Outcome[] = [];
  const healthStatuses: number[] = [];
  /** Every health answer but a 200, with who gave it and when (ms from the kill), for the assertion's message. */
  const healthOdd: Array<{ status: number; worker: string; at: number; body: string }> = [];
  let killedAt = 0;
  let stop = false;
  const CONCURRENCY = 6;
  const MAX_REQUESTS = 20_000;
  const loop = async (): Promise<void> => {
    let i = 0;
    while (!stop && outcomes.length < MAX_REQUESTS) {
      try {
        const res = await httpRequest(gateway.port, `/work/${i++}`, { timeoutMs: 5000 });
        outcomes.push({ at: Date.now(), ok: res.status === 200, error: res.status === 200 ? undefined : `status ${res.status}` });
      } catch (err) {
        outcomes.push({ at: Date.now(), ok: false, error: (err as Error).message });
      }
    }
  };
  const healthLoop = async (): Promise<void> => {
    while (!stop) {
      try {
        const res = await httpRequest(gateway.port, '/healthcheck');
        healthStatuses.push(res.status);
        if (res.status !== 200) healthOdd.push({ status: res.status, worker: String(res.headers['x-gateway-worker']), at: Date.now() - killedAt, body: res.body.slice(0, 300) });
      } catch {
        healthStatuses.push(0);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  const loops = [...Array.from({ length: CONCURRENCY }, loop), healthLoop()];
  try {
    await eventually(async () => (outcomes.length >= 200 ? true : undefined), 10_000, 20, 'traffic flowing');
    killedAt = Date.now();
    process.kill(victim, 'SIGKILL');

    const replaced = await gateway.waitForLog(
      (l) => l.msg === 'worker listening' && Number(l.pid) !== victim && (l.time as number) >= killedAt,
      10_000,
      'a replacement worker listening',
    );
    const replacedAt = Date.now();
    t.ok(
      gateway.lines.some((l) => Number(l.workerPid) === victim && l.signal === 'SIGKILL' && /replacing/.test(String(l.msg))),
      'the primary logs why the worker went',
    );
    t.not(replaced.pid, victim, 'the replacement is a new process');
    // Keep the load on for a while with the replacement serving.
    const countAtReplacement = outcomes.length;
    await eventually(async () => (outcomes.length >= countAtReplacement + 300 ? true : undefined), 15_000, 20, 'traffic after the replacement');
    stop = true;
    await Promise.all(loops);

    const failures = outcomes.filter((o) => !o.ok);
    t.ok(outcomes.length >= 500, `${outcomes.length} requests made`);
    t.ok(failures.length <= 2 * CONCURRENCY, `only requests caught in the kill failed (${failures.length}: ${JSON.stringify(failures.slice(0, 5))})`);
    t.same(
      outcomes.filter((o) => o.at > replacedAt + 100 && !o.ok),
      [],
      'every request after the replacement succeeded',
    );
    t.ok(healthStatuses.length > 5);
    // Seen twice in CI as one 503 among about sixty probes; the message says which worker gave it, when and with what.
    t.same(healthStatuses.filter((s) => s !== 200 && s !== 0), [], `/healthcheck stayed 200 (victim ${victim}, survivor ${String(started[1]!.workerPid)}, replacement ${String(replaced.pid)}: ${JSON.stringify(healthOdd)})`);
    t.ok(healthStatuses.filter((s) => s === 0).length <= 1, 'at most one health probe lost to the kill');

    const pids = new Set<string>();
    await eventually(
      async () => {
        const res = await httpRequest(gateway.port, '/healthcheck');
        t.equal(res.status, 200);
        pids.add(String(res.headers['x-gateway-worker']));
        return pids.size >= 2 ? true : undefined;
      },
      5000,
      10,
      'both workers answering',
    );
    t.notOk(pids.has(String(victim)), 'the killed worker no longer answers');
  } finally {
    stop = true;
    await Promise.all(loops);
  }
});
