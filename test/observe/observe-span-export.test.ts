// SpanExport on its own: the spans of finished requests as an OTLP/HTTP receiver decodes them
// (status, kinds, parents, times), and the drop count when the queue is full.
import t from 'tap';
import { RequestTrace } from '../../src/exchange/request-trace.js';
import { SpanExport, SPANS_DROPPED, SPANS_EXPORTED, type TracedRequest } from '../../src/observe/tracing.js';
import { startOtlpReceiver, type OtlpSpan } from '../helpers/otlp-receiver.js';
import { eventually } from '../helpers/gateway-process.js';
import { findFreePort } from '../../src/cluster/free-port.js';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

const receiver = await startOtlpReceiver(t);
const spans = receiver.spans;
const url = receiver.url;

const counted = new Map<string, number>();
const counters = { add: (name: string, n = 1) => void counted.set(name, (counted.get(name) ?? 0) + n) };

const T0 = 1_790_000_000_000.25;
function request(trace: RequestTrace, status: number, overrides: Partial<TracedRequest> = {}): TracedRequest {
  return {
    trace,
    method: 'GET',
    path: '/items/7',
    query: '',
    routeTemplate: '/items/{id}',
    status,
    startedAt: T0,
    endedAt: T0 + 9.5,
    middlewareStartedAt: T0 + 0.5,
    middlewareEndedAt: T0 + 1.25,
    upstream: 'http://127.0.0.1:8081',
    upstreamMethod: 'GET',
    upstreamTarget: '/items/7',
    upstreamStartedAt: T0 + 1.5,
    upstreamEndedAt: T0 + 9,
    upstreamStatus: status,
    upstreamError: null,
    secure: false,
    clientAddress: '127.0.0.1',
    userAgent: 'test/1',
    requestId: 'rid-1',
    host: undefined,
    bytesIn: 0,
    bytesOut: 12,
    cut: false,
    ...overrides,
  };
}

const attribute = (span: OtlpSpan, key: string) => {
  const value = span.attributes.find((a) => a.key === key)?.value;
  return value === undefined ? undefined : Object.values(value)[0];
};

const nanos = (ms: number): bigint => BigInt(Math.trunc(ms / 1000)) * 1_000_000_000n + BigInt(Math.round((ms - Math.trunc(ms / 1000) * 1000) * 1e6));

t.test('a failed request: server and client spans say ERROR, the middleware span is unset; parents and times as recorded', async (t) => {
  spans.length = 0;
  const exporter = new SpanExport({ otlpEndpoint: url, sampleRatio: 1, serviceName: 'unit' }, counters, () => {}, { scheduledDelayMillis: 20 });
  const trace = new RequestTrace('0af7651916cd43dd8448eb211c80319c', 'b7ad6b7169203331', '00f067aa0ba902b7', '', true);
  exporter.record(request(trace, 503));
  await exporter.flush();
  t.equal(spans.length, 3);
  const server = spans.find((s) => s.kind === 2)!;
  const middleware = spans.find((s) => s.kind === 1)!;
  const client = spans.find((s) => s.kind === 3)!;
  t.equal(server.name, 'GET /items/{id}');
  t.equal(server.spanId, 'b7ad6b7169203331');
  t.equal(server.parentSpanId ?? '', '', 'a trace started here: no parent');
  t.equal(server.status?.code, 2, 'a 5xx is an error of the server span');
  t.equal(attribute(server, 'error.type'), '503', "its error.type is the status, as text");
  t.equal(attribute(server, 'url.scheme'), 'http');
  t.equal(client.status?.code, 2, 'and of the upstream call');
  t.equal(middleware.status?.code ?? 0, 0, 'the middleware span is left unset');
  t.equal(client.spanId, '00f067aa0ba902b7', 'the upstream span id is the one propagated');
  t.equal(middleware.parentSpanId, server.spanId);
  t.equal(client.parentSpanId, server.spanId);
  for (const span of spans) t.equal(span.traceId, '0af7651916cd43dd8448eb211c80319c');
  t.equal(BigInt(server.startTimeUnixNano), nanos(T0), 'times to the nanosecond of what was recorded');
  t.equal(BigInt(server.endTimeUnixNano), nanos(T0 + 9.5));
  t.equal(BigInt(middleware.endTimeUnixNano), nanos(T0 + 1.25));
  t.equal(BigInt(client.startTimeUnixNano), nanos(T0 + 1.5));
  t.equal(counted.get(SPANS_EXPORTED), 3, 'counted as exported');
  await exporter.close();
});

t.test('a 4xx leaves the server span unset; a remote parent is the server span parent; no middleware span when none ran', async (t) => {
  spans.length = 0;
  const exporter = new SpanExport({ otlpEndpoint: url, sampleRatio: 1, serviceName: 'unit' }, counters, () => {}, { scheduledDelayMillis: 20 });
  const trace = new RequestTrace('4bf92f3577b34da6a3ce929d0e0e4736', '1111111111111111', '2222222222222222', '00f067aa0ba902b7', true);
  exporter.record(request(trace, 404, { middlewareStartedAt: 0, middlewareEndedAt: 0, secure: true }));
  await exporter.flush();
  t.same(
    spans.map((s) => s.kind).sort(),
    [2, 3],
  );
  const server = spans.find((s) => s.kind === 2)!;
  t.equal(server.parentSpanId, '00f067aa0ba902b7', "the caller's span");
  t.equal(attribute(server, 'url.scheme'), 'https', 'a request over TLS');
  t.equal(attribute(server, 'server.address'), undefined, 'no Host: no server.address');
  t.equal(server.status?.code ?? 0, 0);
  t.equal(attribute(server, 'error.type'), undefined, 'a 4xx is no error of the server');
  await exporter.close();
});

t.test("the server span's server.address and server.port come from the client's Host", async (t) => {
  spans.length = 0;
  const exporter = new SpanExport({ otlpEndpoint: url, sampleRatio: 1, serviceName: 'unit' }, counters, () => {}, { scheduledDelayMillis: 20 });
  const cases: Array<[string, boolean, string, number | undefined]> = [
    ['api.example.com:8443', false, 'api.example.com', 8443],
    ['api.example.com', false, 'api.example.com', 80],
    ['api.example.com', true, 'api.example.com', 443],
    ['[::1]:9000', false, '::1', 9000],
    ['[2001:db8::1]', true, '2001:db8::1', 443],
    ['bad:host:', false, 'bad:host', undefined],
  ];
  const traces = cases.map((_, i) => new RequestTrace(String(i + 1).repeat(32), '1111111111111111', '2222222222222222', '', true));
  cases.forEach(([host, secure], i) => exporter.record(request(traces[i]!, 200, { host, secure })));
  await exporter.flush();
  cases.forEach(([host, secure, address, port], i) => {
    const server = spans.find((s) => s.kind === 2 && s.traceId === traces[i]!.traceId)!;
    t.equal(attribute(server, 'server.address'), address, `${host} (${secure ? 'https' : 'http'}): address`);
    t.equal(attribute(server, 'server.port'), port, `${host} (${secure ? 'https' : 'http'}): port`);
  });
  await exporter.close();
});

t.test('the client span tells what the upstream answered: its own status, error.type, ERROR for a 4xx or 5xx or no answer', async (t) => {
  spans.length = 0;
  const exporter = new SpanExport({ otlpEndpoint: url, sampleRatio: 1, serviceName: 'unit' }, counters, () => {}, { scheduledDelayMillis: 20 });
  const traces = ['11', '22', '33', '44'].map((n) => new RequestTrace(n.repeat(16), '1111111111111111', n.repeat(8), '', true));
  exporter.record(request(traces[0]!, 502, { upstreamStatus: 0, upstreamError: 'connect_refused' }));
  exporter.record(request(traces[1]!, 404));
  exporter.record(request(traces[2]!, 200, { upstreamStatus: 503 }));
  exporter.record(request(traces[3]!, 200));
  await exporter.flush();
  const client = (trace: RequestTrace) => spans.find((s) => s.kind === 3 && s.traceId === trace.traceId)!;
  const server = (trace: RequestTrace) => spans.find((s) => s.kind === 2 && s.traceId === trace.traceId)!;
  const unreachable = client(traces[0]!);
  t.equal(attribute(unreachable, 'http.response.status_code'), undefined, 'no answer came: no status code (the 502 was the gateway\'s)');
  t.equal(attribute(unreachable, 'error.type'), 'connect_refused', 'error.type says why');
  t.equal(unreachable.status?.code, 2, 'ERROR');
  t.equal(attribute(server(traces[0]!), 'http.response.status_code'), 502, 'the server span keeps the status the client got');

  const notFound = client(traces[1]!);
  t.equal(attribute(notFound, 'http.response.status_code'), 404);
  t.equal(attribute(notFound, 'error.type'), '404');
  t.equal(notFound.status?.code, 2, 'a 4xx is an error of the client span');
  t.equal(server(traces[1]!).status?.code ?? 0, 0, 'and not of the server span');

  const substituted = client(traces[2]!);
  t.equal(attribute(substituted, 'http.response.status_code'), 503, "the upstream's status, not the 200 the client got");
  t.equal(substituted.status?.code, 2);
  t.equal(server(traces[2]!).status?.code ?? 0, 0);

  const fine = client(traces[3]!);
  t.equal(attribute(fine, 'http.response.status_code'), 200);
  t.equal(attribute(fine, 'error.type'), undefined);
  t.equal(fine.status?.code ?? 0, 0);
  await exporter.close();
});

t.test('past maxQueueSize spans are dropped and counted, not queued', async (t) => {
  const before = counted.get(SPANS_DROPPED) ?? 0;
  // Nothing listens there: exports fail, so nothing leaves the queue while the test fills it.
  const closedPort = await findFreePort('127.0.0.1');
  const exporter = new SpanExport({ otlpEndpoint: `http://127.0.0.1:${closedPort}/v1/traces`, sampleRatio: 1, serviceName: 'unit' }, counters, () => {}, {
    maxQueueSize: 6,
    scheduledDelayMillis: 60_000,
    exportTimeoutMillis: 200,
  });
  const trace = new RequestTrace('4bf92f3577b34da6a3ce929d0e0e4736', '1111111111111111', '2222222222222222', '', true);
  for (let i = 0; i < 3; i++) exporter.record(request(trace, 200));
  t.equal((counted.get(SPANS_DROPPED) ?? 0) - before, 3, 'the third request (3 spans) did not fit in 6');
  await exporter.close();
});

t.test('an export without a complete answer by its deadline is dropped, and the next ones reach the collector', async (t) => {
  // A collector that answers 200 with a 100000-byte body it sends a byte at a time, until told to be well.
  let trickle = true;
  let received = 0;
  const trickling = new Set<ServerResponse>();
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (!trickle) {
        received++;
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100000' });
      trickling.add(res);
      const drip = setInterval(() => res.write('{'), 100);
      res.on('close', () => {
        clearInterval(drip);
        trickling.delete(res);
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const res of trickling) res.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const collector = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`;
  const dropped = () => counted.get(SPANS_DROPPED) ?? 0;
  const exported = () => counted.get(SPANS_EXPORTED) ?? 0;
  const warnings: string[] = [];
  const exporter = new SpanExport({ otlpEndpoint: collector, sampleRatio: 1, serviceName: 'unit' }, counters, (m) => warnings.push(m), {
    scheduledDelayMillis: 20,
    exportTimeoutMillis: 500,
  });
  t.teardown(() => exporter.close());
  const trace = new RequestTrace('4bf92f3577b34da6a3ce929d0e0e4736', '1111111111111111', '2222222222222222', '', true);
  const droppedBefore = dropped();

  // Three exports, one after the other, each stalled past its deadline.
  for (let i = 1; i <= 3; i++) {
    exporter.record(request(trace, 200));
    await eventually(async () => (dropped() - droppedBefore === 3 * i ? true : undefined), 5000, 20, `export ${i}: its 3 spans counted dropped`);
    t.pass(`export ${i}: its 3 spans are counted dropped after the 500 ms deadline`);
  }
  await eventually(async () => (trickling.size === 0 ? true : undefined), 5000, 20, 'the stalled connections closed');
  t.pass('the gateway closed the connections of the stalled exports');
  t.match(warnings[0], /^span export failed \(the collector at http:\/\/127\.0\.0\.1:\d+\/v1\/traces gave no complete answer within 500 ms\)/, 'the warning says why');
  t.equal(warnings.length, 1, 'once');

  trickle = false;
  const exportedBefore = exported();
  exporter.record(request(trace, 200));
  await exporter.flush();
  t.equal(received, 1, 'the collector, well again, gets the next export');
  t.equal(exported() - exportedBefore, 3, 'counted exported');
  t.equal(warnings[1], 'span export works again');
});

t.test('a collector that answers 503 to every try: the warning says so (the exporter passes on no status)', async (t) => {
  let posts = 0;
  const server = createServer((req, res) => {
    posts++;
    req.resume();
    req.on('end', () => res.writeHead(503, { 'content-type': 'text/plain' }).end('overloaded'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const warnings: string[] = [];
  const exporter = new SpanExport({ otlpEndpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`, sampleRatio: 1, serviceName: 'unit' }, counters, (m) => warnings.push(m), {
    scheduledDelayMillis: 20,
    exportTimeoutMillis: 800,
  });
  t.teardown(() => exporter.close());
  const droppedBefore = counted.get(SPANS_DROPPED) ?? 0;
  exporter.record(request(new RequestTrace('4bf92f3577b34da6a3ce929d0e0e4736', '1111111111111111', '3333333333333333', '', true), 200));
  await eventually(async () => ((counted.get(SPANS_DROPPED) ?? 0) > droppedBefore ? true : undefined), 10_000, 20, 'the spans counted dropped');
  t.ok(posts >= 1, `the collector was asked (${posts} posts)`);
  t.equal(warnings[0], 'span export failed (the collector answered 429, 502, 503 or 504 to every try until the export deadline); spans are dropped until it works again');
});
