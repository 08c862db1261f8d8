// Spans wait in the export queue for up to a second. Trace and span ids are slices of randomHex's
// pooled string (32 KiB), and V8 keeps a slice's whole parent: a queued span holding a slice kept a pool
// string alive for each sampled request until its export. This measures what the queue keeps per
// sampled request, with ids made exactly as the gateway makes them.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import t from 'tap';
import { RequestTrace } from '../../src/exchange/request-trace.js';
import { ownedId, randomHex } from '../../src/observe/random-hex.js';
import { ownedTrace } from '../../src/observe/request-observe.js';
import { SpanExport, type TracedRequest } from '../../src/observe/tracing.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** A sampled request's ids as RequestObserve.begin makes them (one randomHex(32), sliced). */
function newTrace(): RequestTrace {
  const ids = randomHex(32);
  return new RequestTrace(ids.slice(0, 32), ids.slice(32, 48), ids.slice(48), '', true);
}

function finished(trace: RequestTrace, i: number): TracedRequest {
  const now = performance.timeOrigin + performance.now();
  return {
    trace,
    method: 'GET',
    path: `/items/${i}`,
    query: '',
    routeTemplate: '/items/{id}',
    status: 200,
    startedAt: now,
    endedAt: now + 1,
    middlewareStartedAt: now + 0.1,
    middlewareEndedAt: now + 0.2,
    upstream: 'http://127.0.0.1:8080',
    upstreamMethod: 'GET',
    upstreamTarget: `/items/${i}`,
    upstreamStartedAt: now + 0.3,
    upstreamEndedAt: now + 0.9,
    upstreamStatus: 200,
    upstreamError: null,
    secure: false,
    clientAddress: '127.0.0.1',
    userAgent: 'test',
    requestId: `id-${i}`,
    host: 'example.test',
    bytesIn: 0,
    bytesOut: 10,
    cut: false,
  };
}

t.test('a queued sampled request keeps its spans, not the id pool', async (t) => {
  // Nothing is exported while this runs: the batch waits for a size and a delay it never reaches.
  const spans = new SpanExport({ otlpEndpoint: 'http://127.0.0.1:9/v1/traces', sampleRatio: 0.01, serviceName: 'test' }, { add() {} }, () => {}, {
    maxQueueSize: 1_000_000,
    maxExportBatchSize: 1_000_000,
    scheduledDelayMillis: 3_600_000,
  });
  t.teardown(() => spans.close());
  const KEPT = 2000;
  // Warm-up: the SDK's and this code's first allocations are not the queue's.
  for (let i = 0; i < 200; i++) spans.record(finished(newTrace(), i));
  gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < KEPT; i++) {
    // 99 unsampled requests take their ids from the pool and let them go; the 100th is sampled.
    for (let j = 0; j < 99; j++) newTrace();
    spans.record(finished(newTrace(), i));
  }
  gc();
  const perRequest = (process.memoryUsage().heapUsed - before) / KEPT;
  // Node 20: about 2,200 bytes with the ids owned, 8,500 with the slices (three spans each; a pool string is 8 KB).
  t.ok(perRequest < 4500, `the queue keeps ${perRequest.toFixed(0)} bytes per sampled request (under 4,500)`);
});

t.test('ownedId is the same id', async (t) => {
  for (const bytes of [8, 16, 32]) {
    const id = randomHex(bytes);
    const own = ownedId(id);
    t.equal(own, id);
    t.equal(own.length, bytes * 2);
  }
});

t.test('ownedTrace is the same trace (a WebSocket connection keeps it for its access-log line)', async (t) => {
  const trace = newTrace();
  trace.traceState = 'vendor=1';
  trace.middlewareStartedAt = 5;
  trace.middlewareEndedAt = 6;
  t.same({ ...ownedTrace(trace) }, { ...trace });
});
