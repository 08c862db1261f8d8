// /healthcheck: 503 while an upstream's doc is held back, then 200 from every worker, and 200 for good.
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, swaggerDoc, testConfig, type GatewayProcess } from '../helpers/gateway-process.js';

let releaseDoc: () => void = () => {};
const slow = await startUpstream(t, {
  name: 'slow',
  spec: swaggerDoc('slow', { '/slow/{id}': ['GET'] }),
  holdSpec: new Promise<void>((resolve) => (releaseDoc = resolve)),
});
const fast = await startUpstream(t, { name: 'fast' });

const gateway = await startGateway(t, {
  config: testConfig(
    [
      { serviceType: 'swagger2', serviceLocation: slow.location, weight: 2 },
      { serviceType: 'static', serviceLocation: fast.location, endpoints: [{ method: 'GET', path: '/fast' }] },
    ],
    { discovery: { fetchTimeoutMs: 30_000, retries: 0, backoffMs: 100, refreshIntervalMs: 0 } },
  ),
});

type Report = {
  listeners: { pending: string[]; ready: string[] };
  middleware: { pending: string[]; ready: string[] };
  upstreams: Array<{ serviceType: string; serviceLocation: string; weight: number; state: string; endpoints: number; lastError?: string }>;
  buildInfo: Record<string, unknown>;
  host: string;
};

async function health(): Promise<{ status: number; pid: string; report: Report }> {
  const res = await httpRequest(gateway.port, '/healthcheck');
  return { status: res.status, pid: String(res.headers['x-gateway-worker']), report: JSON.parse(res.body) as Report };
}

function workerPids(gw: GatewayProcess): Set<string> {
  return new Set(gw.lines.filter((l) => l.msg === 'worker started').map((l) => String(l.workerPid)));
}

/** Probes over fresh connections until every live worker pid has answered with `status`. */
async function everyWorkerAnswers(status: number, timeoutMs: number): Promise<Map<string, Report>> {
  const answered = new Map<string, Report>();
  await eventually(
    async () => {
      const h = await health();
      if (h.status === status) answered.set(h.pid, h.report);
      else answered.clear();
      const pids = workerPids(gateway);
      return [...pids].every((pid) => answered.has(pid)) && answered.size >= 2 ? true : undefined;
    },
    timeoutMs,
    20,
    `every worker answering ${status}`,
  );
  return answered;
}

t.test('while a doc is held back: 503, that upstream pending, the other ready', async (t) => {
  // Long enough for both workers to be serving with the static upstream's table.
  await gateway.waitForLog((l) => l.msg === 'worker listening' && gateway.lines.filter((x) => x.msg === 'worker listening').length >= 2);
  for (let i = 0; i < 6; i++) {
    const { status, report } = await health();
    t.equal(status, 503);
    t.match(report.upstreams, [
      { serviceLocation: slow.location, state: 'pending', endpoints: 0 },
      { serviceLocation: fast.location, state: 'ready' },
    ]);
  }
  const res = await httpRequest(gateway.port, '/fast');
  t.equal(res.status, 200, 'a ready upstream is served while another is pending');
});

t.test('once the doc arrives every worker answers 200 with the full report', async (t) => {
  releaseDoc();
  const reports = await everyWorkerAnswers(200, 10_000);
  const bodies = new Set([...reports.values()].map((r) => JSON.stringify(r)));
  t.equal(bodies.size, 1, 'every worker gives the same answer');
  const report = [...reports.values()][0]!;

  t.same(Object.keys(report).sort(), ['buildInfo', 'host', 'listeners', 'middleware', 'upstreams', 'workers'], 'the documented fields, and workers (an extra field)');
  for (const kind of ['listeners', 'middleware'] as const) {
    t.ok(Array.isArray(report[kind].pending) && Array.isArray(report[kind].ready), `${kind} has pending and ready arrays`);
    t.ok([...report[kind].pending, ...report[kind].ready].every((s) => typeof s === 'string'));
  }
  t.same(report.listeners, { pending: [], ready: ['accessLog'] });
  t.same(report.middleware, { pending: [], ready: [] });
  t.same(report.upstreams, [
    { serviceType: 'swagger2', serviceLocation: slow.location, weight: 2, state: 'ready', endpoints: 1 },
    { serviceType: 'static', serviceLocation: fast.location, weight: 1, state: 'ready', endpoints: 1 },
  ]);
  const info = report.buildInfo;
  t.same(Object.keys(info).sort(), ['builtAtMillis', 'builtAtString', 'name', 'sbtVersion', 'scalaVersion', 'version']);
  for (const value of Object.values(info)) t.type(value, 'string');
  t.match(info.builtAtMillis, /^\d+$/);
  t.match(info.builtAtString, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}$/);
  t.equal(new Date(Number(info.builtAtMillis)).toISOString().replace('T', ' ').replace('Z', ''), info.builtAtString);
  t.equal(info.name, 'specgate');
  t.equal(info.version, '0.1.0');
  t.equal(info.scalaVersion, process.version);
  t.match(info.sbtVersion, /^\d+\.\d+\.\d+/);
  t.type(report.host, 'string');
  t.ok(report.host.length > 0);

  const res = await httpRequest(gateway.port, '/slow/7');
  t.equal(res.status, 200, 'the late upstream is routed to');
});

t.test('after the upstream goes away the report stays 200', async (t) => {
  await slow.close();
  const reports = await everyWorkerAnswers(200, 5000);
  t.equal(reports.size >= 2, true);
  for (let i = 0; i < 6; i++) t.equal((await health()).status, 200);
});
