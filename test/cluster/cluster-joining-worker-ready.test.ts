// A worker binds the gateway's port only once it can serve: a client never meets one that has not yet
// applied its table with the middleware that go with it (503 "the routing table is not loaded yet"),
// and its /metrics is the primary's merged report (asked of the primary per request), never a
// placeholder. At the gateway's first start, for the replacement of a killed worker, and for a
// reload's successors alike.
//
// A test-only delay (see src/cluster/worker.ts) widens the moment a worker that bound too early would
// be seen in: GATEWAY_TEST_WORKER_PREPARE_DELAY_MS holds back the end of a worker's first
// `components.prepare` (as with `kvStores`, whose prepare waits on a dynamic import). A worker that
// bound its port right after the table and the health report arrived answered routed requests 503
// until it ended.
import t from 'tap';
import { findFreePort } from '../../src/cluster/free-port.js';
import { rawRequest } from '../helpers/raw-http.js';
import { startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { answeredBy, probeReplacement, probeSuccessors, probeUntilAnswered, workersStartedSince } from '../helpers/joining-workers.js';

const DELAY_MS = 1500;
/** Answers a new worker must give before the test stops probing. */
const NEW_WORKER_ANSWERS = 10;

const upstream = await startUpstream(t, { name: 'backend' });
const config = (name: string): Record<string, unknown> => ({
  ...testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/work/{id}' }] }]),
  name,
});
const port = await findFreePort('127.0.0.1');
const gateway = await startGateway(t, {
  config: config('first'),
  port,
  waitForListening: false,
  env: { GATEWAY_TEST_WORKER_PREPARE_DELAY_MS: String(DELAY_MS) },
});

/** What one worker answered on one fresh connection: /metrics, then a routed request. */
interface Answer {
  pid: string;
  metrics: { status: number; body: string };
  routed: { status: number; body: string };
}

/**
 * One fresh connection (SO_REUSEPORT hands it to any worker) with two requests in turn: /metrics,
 * whose x-gateway-worker header names the worker, then a routed request, answered by the same worker
 * (proxied responses carry no worker header of their own). Not pipelined: both are answered
 * asynchronously, and uWS closes a connection on which a request arrives while an answer is pending
 * (native-notes.md). Null when the connection gave no two answers (refused before the first bind, or
 * accepted by a worker that was killed).
 */
async function ask(): Promise<Answer | null> {
  const head = (path: string): string => `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`;
  const result = await rawRequest(port, [head('/metrics'), head('/work/1')], { responses: 2, waitMs: 5000, inTurn: true });
  const [metrics, routed] = result.responses;
  const pid = metrics?.headers['x-gateway-worker']?.[0];
  if (!metrics?.complete || !routed?.complete || pid === undefined) return null;
  return {
    pid,
    metrics: { status: metrics.status, body: metrics.body.toString('utf8') },
    routed: { status: routed.status, body: routed.body.toString('utf8') },
  };
}

/** A /metrics body the primary rendered: a report with its uptime, not the placeholder `{}`. */
function isPrimaryReport(body: string): boolean {
  try {
    return typeof (JSON.parse(body) as { uptimeSeconds?: unknown }).uptimeSeconds === 'number';
  } catch {
    return false;
  }
}

/** A problem's detail ("the routing table is not loaded yet"), else the body's start. */
function detail(body: string): string {
  try {
    const problem = JSON.parse(body) as { detail?: unknown };
    if (typeof problem.detail === 'string') return problem.detail;
  } catch {
    // not JSON
  }
  return body.slice(0, 80);
}

/** Every answer that is not what a serving gateway gives: the upstream's 200, and the primary's report. */
function notOk(answers: Answer[]): string[] {
  const wrong: string[] = [];
  for (const a of answers) {
    if (a.routed.status !== 200 || !a.routed.body.includes('"upstream":"backend"')) wrong.push(`routed ${a.routed.status} from ${a.pid}: ${detail(a.routed.body)}`);
    if (a.metrics.status !== 200 || !isPrimaryReport(a.metrics.body)) wrong.push(`/metrics ${a.metrics.status} from ${a.pid}: ${a.metrics.body.slice(0, 40)}`);
  }
  return wrong;
}

t.test("the first workers' first answers already route, and /metrics is the primary's report", async (t) => {
  const answers = await probeUntilAnswered(ask, () => workersStartedSince(gateway, 0), 2, NEW_WORKER_ANSWERS, 'both first workers answering');
  const workers = workersStartedSince(gateway, 0);
  t.equal(workers.length, 2, 'two workers started');
  for (const pid of workers) t.ok(answeredBy(answers, pid) >= NEW_WORKER_ANSWERS, `worker ${pid} answered`);
  t.same(notOk(answers), [], 'every answer is what a serving gateway gives');
  await gateway.waitForLog((l) => l.msg === 'gateway operational', 10_000, 'the gateway operational');
});

t.test('the replacement of a killed worker routes and reports metrics from its first answer', async (t) => {
  const { victim, replacement, answers } = await probeReplacement(gateway, ask, NEW_WORKER_ANSWERS);
  t.not(replacement, victim);
  t.ok(answeredBy(answers, replacement) >= NEW_WORKER_ANSWERS, 'the replacement answered');
  t.same(notOk(answers), [], 'every answer is what a serving gateway gives');
});

t.test("a reload's successors route and report metrics from their first answer", async (t) => {
  const { since, successors, answers } = await probeSuccessors(gateway, config('second'), ask, NEW_WORKER_ANSWERS);
  t.equal(successors.length, 2, 'a successor for each slot');
  for (const pid of successors) t.ok(answeredBy(answers, pid) >= NEW_WORKER_ANSWERS, `successor ${pid} answered`);
  t.same(notOk(answers), [], 'every answer is what a serving gateway gives');
  await gateway.waitForLog((l) => l.msg === 'config reloaded' && (l.time as number) >= since, 10_000, 'the reload done');
});
