// What an operator reads in the exported spans of a running gateway: the resource names the SDK and
// the gateway's version; the server span has the query (an API key hidden) and the caller's
// tracestate; an answer the upstream cut mid-body is a failed server span; a collector that says 429
// with Retry-After gets the batch again (nothing dropped); the recovery line after a failed export is
// info, as the access log's.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { startOtlpReceiver, type OtlpSpan } from '../helpers/otlp-receiver.js';
import { rawRequest } from '../helpers/raw-http.js';

const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
const receiver = await startOtlpReceiver(t);
const upstream = await startUpstream(t, {
  name: 'app',
  handle(req, res) {
    if (req.url!.startsWith('/cut/')) {
      // A head promising 1000 bytes, 10 of them, then the connection goes away.
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '1000' });
      res.write('0123456789');
      setTimeout(() => res.socket?.destroy(), 50);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{"ok":true}');
  },
});
const KEY = 'secret-key-1';
const gateway = await startGateway(t, {
  config: testConfig(
    [{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/items/{id}' }, { method: 'GET', path: '/cut/{id}' }] }],
    {
      accessLog: { enabled: false },
      middleware: [{ id: 'auth', type: 'apiKeyAuth', query: 'api_key', keys: [{ consumer: 'tests', sha256: createHash('sha256').update(KEY).digest('hex') }] }],
      tracing: { otlpEndpoint: receiver.url, sampleRatio: 1 },
    },
  ),
  waitFor: (line) => line.msg === 'gateway operational',
  workers: 1,
  startTimeoutMs: 60_000,
});

const attribute = (span: OtlpSpan, key: string): unknown => {
  const found = span.attributes.find((a) => a.key === key);
  return found === undefined ? undefined : Object.values(found.value)[0];
};
const spansOf = (traceId: string, count: number): Promise<OtlpSpan[]> =>
  eventually(async () => {
    const spans = receiver.spans.filter((s) => s.traceId === traceId);
    return spans.length >= count ? spans : undefined;
  }, 15_000, 50, `${count} spans of trace ${traceId}`);
let traces = 0;
const traceparent = (): { traceId: string; header: string } => {
  const traceId = (++traces).toString(16).padStart(32, 'a');
  return { traceId, header: `00-${traceId}-00f067aa0ba902b7-01` };
};

t.test('resource, url.query without the API key, the caller\'s tracestate', async (t) => {
  const trace = traceparent();
  const res = await httpRequest(gateway.port, `/items/1?color=red&api_key=${KEY}&page=2`, { headers: { traceparent: trace.header, tracestate: 'vendor=abc,other=x1' } });
  t.equal(res.status, 200);
  const spans = await spansOf(trace.traceId, 3);
  const server = spans.find((s) => s.kind === 2)!;
  t.equal(attribute(server, 'url.query'), 'color=red&page=2', 'the query as forwarded: the key hidden');
  t.equal(attribute(server, 'url.path'), '/items/1');
  for (const span of spans) t.equal(span.traceState, 'vendor=abc,other=x1', `${span.name}: the caller's tracestate`);
  const resource = receiver.resource();
  t.equal(resource['service.name'], 'specgate');
  t.equal(resource['service.version'], pkg.version, "service.version is the gateway's version");
  t.equal(resource['telemetry.sdk.name'], 'opentelemetry');
  t.equal(resource['telemetry.sdk.language'], 'nodejs');
  t.match(resource['telemetry.sdk.version'], /^\d+\.\d+\.\d+/);

  const plain = traceparent();
  await httpRequest(gateway.port, '/items/2', { headers: { traceparent: plain.header, 'x-api-key': KEY } });
  const plainServer = (await spansOf(plain.traceId, 2)).find((s) => s.kind === 2)!;
  t.equal(attribute(plainServer, 'url.query'), undefined, 'no query: no url.query');
  t.notOk(plainServer.traceState, 'no tracestate came: none on the spans');
});

t.test('a tracestate over 512 characters is exported as it was passed upstream', async (t) => {
  // OpenTelemetry's TraceState class keeps 512 characters and drops the members past them.
  const trace = traceparent();
  const state = ['a=' + 'x'.repeat(200), 'b=' + 'y'.repeat(200), 'c=' + 'z'.repeat(200), 'd=w'].join(',');
  t.ok(state.length > 512);
  const res = await httpRequest(gateway.port, `/items/3?api_key=${KEY}`, { headers: { traceparent: trace.header, tracestate: state } });
  t.equal(res.status, 200);
  for (const span of await spansOf(trace.traceId, 3)) t.equal(span.traceState, state, `${span.name}: every member`);
});

t.test('long request values are cut at 256 characters in the spans (the access log has them whole)', async (t) => {
  const trace = traceparent();
  const query = `q=${'v'.repeat(7000)}`;
  const agent = `agent/${'w'.repeat(7000)}`;
  const res = await httpRequest(gateway.port, `/items/4?${query}&api_key=${KEY}`, { headers: { traceparent: trace.header, 'user-agent': agent } });
  t.equal(res.status, 200);
  const spans = await spansOf(trace.traceId, 3);
  const server = spans.find((s) => s.kind === 2)!;
  const client = spans.find((s) => s.kind === 3)!;
  t.equal(attribute(server, 'url.query'), query.slice(0, 256));
  t.equal(attribute(server, 'user_agent.original'), agent.slice(0, 256));
  t.equal(String(attribute(client, 'url.full')).length, 256);
  t.ok(String(attribute(client, 'url.full')).startsWith(`${upstream.location}/items/4?q=vvv`));
});

t.test('an answer the upstream cut mid-body: the client gets a 200 cut short, the server span failed', async (t) => {
  const trace = traceparent();
  const result = await rawRequest(gateway.port, `GET /cut/1 HTTP/1.1\r\nHost: test\r\nx-api-key: ${KEY}\r\ntraceparent: ${trace.header}\r\n\r\n`, { waitMs: 5000 });
  const answer = result.responses[0];
  t.equal(answer?.status, 200, 'the head went out');
  const server = (await spansOf(trace.traceId, 3)).find((s) => s.kind === 2)!;
  t.equal(attribute(server, 'http.response.status_code'), 200);
  t.equal(server.status?.code, 2, 'status ERROR');
  t.equal(attribute(server, 'error.type'), 'reset', 'error.type says why');
});

async function spanCounts(): Promise<{ spansExported: number; spansDropped: number }> {
  return (JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as { tracing: { spansExported: number; spansDropped: number } }).tracing;
}

t.test('a collector answering 429 with Retry-After gets the batch again: nothing dropped', async (t) => {
  const before = await spanCounts();
  const posts = receiver.posts();
  receiver.refuseNext(1, 429, { 'retry-after': '1' });
  const trace = traceparent();
  await httpRequest(gateway.port, '/items/3', { headers: { traceparent: trace.header, 'x-api-key': KEY } });
  await spansOf(trace.traceId, 2);
  t.ok(receiver.posts() >= posts + 2, 'refused once, then sent again');
  const after = await eventually(async () => {
    const counts = await spanCounts();
    return counts.spansExported >= before.spansExported + 2 ? counts : undefined;
  }, 10_000, 100, 'the export counted');
  t.equal(after.spansDropped, before.spansDropped, 'no span dropped');
  t.notOk(gateway.lines.some((l) => typeof l.msg === 'string' && l.msg.startsWith('span export failed')), 'no failure logged');
});

t.test('a failed export is a warning, the recovery an info line', async (t) => {
  receiver.refuseNext(1, 400);
  await httpRequest(gateway.port, '/items/4', { headers: { 'x-api-key': KEY } });
  const failed = await gateway.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('span export failed'), 15_000, 'the failure line');
  t.equal(failed.level, 40);
  const trace = traceparent();
  await httpRequest(gateway.port, '/items/5', { headers: { traceparent: trace.header, 'x-api-key': KEY } });
  const recovered = await gateway.waitForLog((l) => l.msg === 'span export works again', 15_000, 'the recovery line');
  t.equal(recovered.level, 30, 'info, as the access log\'s recovery line');
});
