// A worker that joins a serving gateway (the replacement of a killed worker, a reload's successor)
// answers /healthcheck only with the report the primary gave it: once the gateway is operational,
// every answer a client gets is 200, the new worker's first ones included.
//
// GATEWAY_TEST_WORKER_HEALTH_DELAY_MS (test-only, see src/cluster/worker.ts) makes every worker take in
// the primary's health reports that long after it starts, as when the report reaches the worker a read
// after the table the primary sent just before it. A worker that bound its port with the table alone
// answered 503 (its placeholder, body `{}`) until the report came.
import t from 'tap';
import { httpRequest, startGateway, startUpstream, testConfig, untilWorkersAnswer } from '../helpers/gateway-process.js';
import { answeredBy, probeReplacement, probeSuccessors } from '../helpers/joining-workers.js';

const HEALTH_DELAY_MS = 1500;
/** Answers a new worker must give before the test stops probing. */
const NEW_WORKER_ANSWERS = 10;

const upstream = await startUpstream(t, { name: 'backend' });
const config = (name: string): Record<string, unknown> => ({
  ...testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/work/{id}' }] }]),
  name,
});
const gateway = await startGateway(t, {
  config: config('first'),
  env: { GATEWAY_TEST_WORKER_HEALTH_DELAY_MS: String(HEALTH_DELAY_MS) },
  waitFor: (line) => line.msg === 'gateway operational',
});

interface Answer {
  pid: string;
  status: number;
  body: string;
}

/** /healthcheck on one fresh connection; null when the connection failed (one a killed worker had accepted). */
async function ask(): Promise<Answer | null> {
  try {
    const res = await httpRequest(gateway.port, '/healthcheck', { timeoutMs: 5000 });
    return { pid: String(res.headers['x-gateway-worker']), status: res.status, body: res.body };
  } catch {
    return null;
  }
}

/** Both workers answer 200 (each takes in the primary's reports HEALTH_DELAY_MS after its start). */
function bothAnswer200(): Promise<void> {
  return untilWorkersAnswer(gateway.port, '/healthcheck', { timeoutMs: 10_000, description: 'both workers answering 200' });
}

function notOk(answers: Answer[]): string[] {
  return answers.filter((a) => a.status !== 200).map((a) => `${a.status} from ${a.pid}: ${a.body.slice(0, 40)}`);
}

t.test('the replacement of a killed worker answers /healthcheck 200 from its first answer', async (t) => {
  await bothAnswer200();
  const { victim, replacement, answers } = await probeReplacement(gateway, ask, NEW_WORKER_ANSWERS);
  t.not(replacement, victim);
  t.ok(answeredBy(answers, replacement) >= NEW_WORKER_ANSWERS, 'the replacement answered');
  t.same(notOk(answers), [], 'every answer is 200');
});

t.test("a reload's successors answer /healthcheck 200 from their first answer", async (t) => {
  await bothAnswer200();
  const { since, successors, answers } = await probeSuccessors(gateway, config('second'), ask, NEW_WORKER_ANSWERS);
  t.equal(successors.length, 2, 'a successor for each slot');
  for (const pid of successors) t.ok(answeredBy(answers, pid) >= NEW_WORKER_ANSWERS, `successor ${pid} answered`);
  t.same(notOk(answers), [], 'every answer is 200');
  await gateway.waitForLog((l) => l.msg === 'config reloaded' && (l.time as number) >= since, 10_000, 'the reload done');
});
