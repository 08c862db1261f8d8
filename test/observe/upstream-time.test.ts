// The upstream's time as an operator reads it, through the real gateway process: the access log's
// upstreamMs runs from sending the request upstream to the end of the upstream's answer (its body
// included) or to the call's failure, as nginx's $upstream_response_time; upstreamHeaderMs stops at
// the response head; gateway_upstream_duration_seconds records upstreamMs (docs/observability.md,
// docs/observability-tracing.md).
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { parsePrometheus, sampleValue } from '../helpers/prometheus.js';
import { closedPort } from '../helpers/raw-http.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-upstream-time-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const logFile = join(dir, 'access.log');

const STALL_MS = 400;
const UPSTREAM_TIMEOUT_MS = 1000;

const upstream = await startUpstream(t, {
  name: 'app',
  handle(req, res) {
    if (req.url === '/items/stall') {
      // The head and half the body at once, the rest after STALL_MS.
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '10' });
      res.write('01234');
      setTimeout(() => res.end('56789'), STALL_MS);
      return;
    }
    if (req.url === '/items/hang') return; // never answers: the gateway's 504 after timeouts.upstreamMs
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('ok');
  },
});
const dead = `http://127.0.0.1:${await closedPort()}`;

const gateway = await startGateway(t, {
  config: testConfig(
    [
      { serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] },
      { serviceType: 'static', serviceLocation: dead, endpoints: [{ method: 'GET', path: '/dead/{id}' }] },
    ],
    {
      accessLog: { enabled: true, destination: logFile },
      timeouts: { upstreamMs: UPSTREAM_TIMEOUT_MS, connectMs: 1000, clientRequestMs: 10_000, shutdownGraceMs: 5000 },
    },
  ),
  waitFor: (line) => line.msg === 'gateway operational',
  startTimeoutMs: 60_000,
});

type Line = Record<string, unknown>;

function lines(): Line[] {
  if (!existsSync(logFile)) return [];
  return readFileSync(logFile, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Line);
}

function lineFor(path: string): Promise<Line> {
  return eventually(async () => lines().find((l) => l.path === path), 5000, 50, `the access line of ${path}`);
}

async function prometheus() {
  const res = await httpRequest(gateway.port, '/metrics?format=prometheus');
  return parsePrometheus(res.body);
}

t.test('a body that stalls: upstreamMs covers the whole answer, upstreamHeaderMs its head', async (t) => {
  const res = await httpRequest(gateway.port, '/items/stall');
  t.equal(res.status, 200);
  t.equal(res.body, '0123456789');
  const line = await lineFor('/items/stall');
  t.ok((line.upstreamMs as number) >= STALL_MS, `upstreamMs ${String(line.upstreamMs)} includes the ${STALL_MS} ms the body took`);
  t.ok((line.upstreamMs as number) <= (line.latencyMs as number), 'and stays within latencyMs');
  t.ok((line.upstreamHeaderMs as number) < STALL_MS, `upstreamHeaderMs ${String(line.upstreamHeaderMs)} stops at the head`);
});

t.test('an upstream that never answers: 504, upstreamMs is the time waited, no head time', async (t) => {
  const res = await httpRequest(gateway.port, '/items/hang');
  t.equal(res.status, 504);
  const line = await lineFor('/items/hang');
  t.equal(line.upstream, upstream.location, 'the request was sent there');
  // The pool judges its deadlines by a clock read once per sweep, so the 504 can come a little early.
  t.ok((line.upstreamMs as number) >= UPSTREAM_TIMEOUT_MS * 0.9, `upstreamMs ${String(line.upstreamMs)} is the wait until the timeout`);
  t.equal(line.upstreamHeaderMs, null);
});

t.test('an upstream that refuses the connection: 502, upstreamMs set, no head time', async (t) => {
  const res = await httpRequest(gateway.port, '/dead/1');
  t.equal(res.status, 502);
  const line = await lineFor('/dead/1');
  t.equal(line.upstream, dead);
  t.type(line.upstreamMs, 'number', 'a connection was attempted: the call has a time');
  t.equal(line.upstreamHeaderMs, null);
});

t.test('a request not sent upstream (404): both null', async (t) => {
  t.equal((await httpRequest(gateway.port, '/nowhere')).status, 404);
  t.match(await lineFor('/nowhere'), { upstream: null, upstreamMs: null, upstreamHeaderMs: null });
});

t.test('gateway_upstream_duration_seconds records upstreamMs: one per upstream request, the same sum', async (t) => {
  for (const path of ['/items/a', '/items/b']) t.equal((await httpRequest(gateway.port, path)).status, 200);
  for (const [location, paths] of [
    [upstream.location, ['/items/stall', '/items/hang', '/items/a', '/items/b']],
    [dead, ['/dead/1']],
  ] as const) {
    const logged = await eventually(
      async () => {
        const found = lines().filter((l) => l.upstream === location);
        return found.length === paths.length ? found : undefined;
      },
      5000,
      50,
      `the lines of ${location}`,
    );
    const loggedSum = logged.reduce((sum, l) => sum + (l.upstreamMs as number), 0) / 1000;
    const families = await eventually(
      async () => {
        const families = await prometheus();
        return sampleValue(families, 'gateway_upstream_duration_seconds', 'gateway_upstream_duration_seconds_count', { upstream: location }) === paths.length ? families : undefined;
      },
      5000,
      100,
      `${paths.length} upstream durations of ${location}`,
    );
    let requests = 0;
    for (const sample of families.get('gateway_upstream_requests_total')!.samples) if (sample.labels.upstream === location) requests += sample.value;
    t.equal(requests, paths.length, `${location}: as many requests as lines`);
    const sum = sampleValue(families, 'gateway_upstream_duration_seconds', 'gateway_upstream_duration_seconds_sum', { upstream: location })!;
    // The log rounds to the microsecond, the histogram records whole microseconds rounded up.
    t.ok(Math.abs(sum - loggedSum) <= paths.length * 2e-6, `${location}: _sum ${sum} is the sum of upstreamMs (${loggedSum})`);
  }
});

t.test('gateway_request_duration_seconds_sum is the sum of the logged latencyMs', async (t) => {
  const logged = lines().filter((l) => l.endpoint === '/items/{id}');
  t.equal(logged.length, 4);
  const loggedSum = logged.reduce((sum, l) => sum + (l.latencyMs as number), 0) / 1000;
  const families = await prometheus();
  let sum = 0;
  let count = 0;
  for (const sample of families.get('gateway_request_duration_seconds')!.samples) {
    if (sample.labels.route !== '/items/{id}') continue;
    if (sample.name.endsWith('_sum')) sum += sample.value;
    if (sample.name.endsWith('_count')) count += sample.value;
  }
  t.equal(count, 4);
  t.ok(Math.abs(sum - loggedSum) <= 4 * 2e-6, `_sum ${sum} is the sum of latencyMs (${loggedSum})`);
});
