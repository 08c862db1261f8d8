// Requests the gateway refuses itself after routing, through the real gateway process: a 413 (body
// declared too large, or found too large while chunked, before anything went upstream) and a 400 (a
// head that cannot be written upstream) reach no upstream, so the access log names none, has no
// upstreamMs, and gateway_upstream_requests_total does not count them; both 413s count under their
// endpoint alike. A 408 whose head already went upstream is upstream traffic (docs/observability.md,
// docs/reference/accept.md).
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { parsePrometheus, sampleValue } from '../helpers/prometheus.js';
import { rawRequest } from '../helpers/raw-http.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-refused-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const logFile = join(dir, 'access.log');

const MAX_BODY = 100;
const upstream = await startUpstream(t, { name: 'app' });
const gateway = await startGateway(t, {
  config: testConfig(
    [
      {
        serviceType: 'static',
        serviceLocation: upstream.location,
        endpoints: [
          { method: 'GET', path: '/items/{id}' },
          { method: 'POST', path: '/items/{id}' },
        ],
      },
    ],
    {
      accessLog: { enabled: true, destination: logFile },
      limits: { maxBodyBytes: MAX_BODY },
      timeouts: { upstreamMs: 5000, connectMs: 1000, clientRequestMs: 600, shutdownGraceMs: 5000 },
    },
  ),
  waitFor: (line) => line.msg === 'gateway operational',
  startTimeoutMs: 60_000,
});

type Line = Record<string, unknown>;

function lineFor(path: string): Promise<Line> {
  return eventually(
    async () => {
      if (!existsSync(logFile)) return undefined;
      const lines = readFileSync(logFile, 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Line);
      return lines.find((l) => l.path === path);
    },
    5000,
    50,
    `the access line of ${path}`,
  );
}

const big = 'x'.repeat(MAX_BODY * 20);
const cases = [
  {
    name: '413, Content-Length over the limit',
    path: '/items/declared',
    payload: `POST /items/declared HTTP/1.1\r\nHost: gw\r\nContent-Length: ${big.length}\r\n\r\n${big}`,
    status: 413,
  },
  {
    name: '413, a chunked body over the limit',
    path: '/items/chunked',
    payload: `POST /items/chunked HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n${big.length.toString(16)}\r\n${big}\r\n0\r\n\r\n`,
    status: 413,
  },
  {
    name: '400, a header value that is not UTF-8',
    path: '/items/bytes',
    payload: Buffer.concat([Buffer.from('GET /items/bytes HTTP/1.1\r\nHost: gw\r\nX-Name: a'), Buffer.from([0xff, 0xfe]), Buffer.from('b\r\n\r\n')]),
    status: 400,
  },
];

t.test('refused after routing: under the endpoint, under no upstream', async (t) => {
  for (const c of cases) {
    const result = await rawRequest(gateway.port, c.payload, { waitMs: 5000, responses: 1 });
    t.equal(result.responses[0]?.status, c.status, c.name);
    const line = await lineFor(c.path);
    t.match(line, { status: c.status, endpoint: '/items/{id}', upstream: null, upstreamMs: null, upstreamHeaderMs: null }, `${c.name}: the access line`);
    t.notOk(upstream.seen.has(`${c.path.startsWith('/items/bytes') ? 'GET' : 'POST'} ${c.path}`), `${c.name}: the upstream got nothing`);
  }
  // A body that does not come whole in time: its head (and what came of the body) already went to the
  // upstream, which saw the request: that is upstream traffic, answered 408.
  const slow = await rawRequest(gateway.port, 'POST /items/slow HTTP/1.1\r\nHost: gw\r\nContent-Length: 50\r\n\r\n0123456789', { waitMs: 5000, responses: 1 });
  t.equal(slow.responses[0]?.status, 408);
  t.ok(upstream.seen.has('POST /items/slow'), 'the upstream got the head of the 408');
  const slowLine = await lineFor('/items/slow');
  t.match(slowLine, { status: 408, endpoint: '/items/{id}', upstream: upstream.location, upstreamHeaderMs: null });
  t.type(slowLine.upstreamMs, 'number');
  t.equal((await httpRequest(gateway.port, '/items/ok')).status, 200, 'a request that was forwarded');

  const families = await eventually(
    async () => {
      const families = parsePrometheus((await httpRequest(gateway.port, '/metrics?format=prometheus')).body);
      const ok = sampleValue(families, 'gateway_upstream_requests_total', 'gateway_upstream_requests_total', { upstream: upstream.location, status: '200' });
      const slow = sampleValue(families, 'gateway_route_requests_total', 'gateway_route_requests_total', { method: 'POST', route: '/items/{id}', status: '408' });
      return ok === 1 && slow === 1 ? families : undefined;
    },
    5000,
    100,
    'the requests in /metrics',
  );
  const upstreamStatuses = families.get('gateway_upstream_requests_total')!.samples.map((s) => `${s.labels.upstream} ${s.labels.status}`);
  t.same(upstreamStatuses.sort(), [`${upstream.location} 200`, `${upstream.location} 408`], 'gateway_upstream_requests_total counts only the requests sent upstream');
  t.equal(sampleValue(families, 'gateway_upstream_duration_seconds', 'gateway_upstream_duration_seconds_count', { upstream: upstream.location }), 2);
  const route = (method: string, status: string) => sampleValue(families, 'gateway_route_requests_total', 'gateway_route_requests_total', { method, route: '/items/{id}', status });
  t.equal(route('POST', '413'), 2, 'both 413s, whatever the framing, count under the endpoint');
  t.equal(route('GET', '400'), 1);
});

t.test('a too-large body for a path no endpoint serves: 404, as any request there', async (t) => {
  const result = await rawRequest(gateway.port, `POST /nowhere HTTP/1.1\r\nHost: gw\r\nContent-Length: ${big.length}\r\n\r\n${big}`, { waitMs: 5000, responses: 1 });
  t.equal(result.responses[0]?.status, 404);
  t.match(await lineFor('/nowhere'), { endpoint: null, upstream: null });
});
