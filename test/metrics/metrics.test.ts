import t, { type Test } from 'tap';
import { MetricsRecorder, type MetricsDelta } from '../../src/metrics/recorder.js';
import { MetricsAggregator, type MetricsReport, type LatencySummaryMs } from '../../src/metrics/aggregate.js';
import { PROMETHEUS_CONTENT_TYPE } from '../../src/metrics/prometheus.js';
import { parsePrometheus, sampleValue } from '../helpers/prometheus.js';

/** Deterministic PRNG so failures reproduce. */
function lcg(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

interface Sample {
  routeKey: string | null;
  upstream: string | null;
  status: number;
  micros: number;
}

const UPSTREAMS = ['http://10.0.0.1:8080', 'http://10.0.0.2:8080', null];
// Keys with characters Prometheus label values must escape.
const ROUTES = ['GET /users/{id}', 'POST /users', 'GET /files/{p: [a-z"]+\\d}', 'GET /odd\nkey', null];
const STATUSES = [200, 200, 200, 201, 404, 502, 503];

function makeSamples(seed: number, n: number): Sample[] {
  const rnd = lcg(seed);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rnd() * xs.length)]!;
  return Array.from({ length: n }, () => ({
    routeKey: pick(ROUTES),
    upstream: pick(UPSTREAMS),
    status: pick(STATUSES),
    // 1 µs .. ~2 s, skewed towards small values like real latencies.
    micros: 1 + Math.floor(rnd() ** 4 * 2_000_000),
  }));
}

/** Through JSON, as over cluster IPC. */
function ship(delta: MetricsDelta): MetricsDelta {
  return JSON.parse(JSON.stringify(delta));
}

/** The smallest value with at least p % of the values at or below it (HDR's definition). */
function exactPercentile(sorted: number[], p: number): number {
  // p / 100 * n in floating point can land just above an integer (99.9 / 100 * 10000 = 9990.000000000002).
  const rank = Math.ceil((p * sorted.length) / 100 - 1e-9);
  return sorted[Math.max(1, rank) - 1]!;
}

function checkLatency(t: Test, label: string, latency: LatencySummaryMs, micros: number[], relative: number): void {
  const sorted = [...micros].sort((a, b) => a - b);
  t.equal(latency.count, sorted.length, `${label} count`);
  const { p50, p90, p99, p999, max } = latency;
  t.ok(p50 <= p90 && p90 <= p99 && p99 <= p999 && p999 <= max, `${label} p50 <= p90 <= p99 <= p999 <= max`);
  t.equal(max, sorted.at(-1)! / 1000, `${label} max is exact`);
  for (const [p, got] of [[50, p50], [90, p90], [99, p99], [99.9, p999]] as const) {
    const exact = exactPercentile(sorted, p);
    const gotMicros = got * 1000;
    // HDR reports the top of the exact value's bucket: never below it, at most `relative` above.
    if (!(gotMicros >= exact - 0.5 && gotMicros <= exact * (1 + relative) + 1)) {
      t.fail(`${label} p${p}: got ${gotMicros} µs, exact ${exact} µs`);
    }
  }
  const sum = micros.reduce((a, b) => a + b, 0);
  t.equal(latency.sum, sum / 1000, `${label} sum`);
  t.ok(Math.abs(latency.mean - sum / micros.length / 1000) <= 0.0005, `${label} mean`);
}

function countBy<T>(xs: readonly T[], key: (x: T) => string | null): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const x of xs) {
    const k = key(x);
    if (k === null) continue;
    out.set(k, [...(out.get(k) ?? []), x]);
  }
  return out;
}

function statusCounts(samples: readonly Sample[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of samples) out[s.status] = (out[s.status] ?? 0) + 1;
  return out;
}


/** Two workers record, ship several deltas, the primary merges. */
function twoWorkers(samplesA: Sample[], samplesB: Sample[], opts: { wasmB?: boolean; now?: () => number } = {}) {
  const workers = [new MetricsRecorder(), new MetricsRecorder({ useWebAssembly: opts.wasmB ?? true })];
  const aggregator = new MetricsAggregator(opts.now);
  aggregator.setWorkerCount(2);
  [samplesA, samplesB].forEach((samples, w) => {
    samples.forEach((s, i) => {
      workers[w]!.requestStarted();
      workers[w]!.requestFinished(s.routeKey, s.upstream, s.status, s.micros);
      if (i % 997 === 0) aggregator.addDelta(w + 1, ship(workers[w]!.takeDelta()));
    });
    aggregator.addDelta(w + 1, ship(workers[w]!.takeDelta()));
    aggregator.addDelta(w + 1, ship(workers[w]!.takeDelta())); // an empty delta changes nothing
  });
  return { workers, aggregator };
}

t.test('two workers merged: totals, statuses, per upstream and per endpoint, percentiles', async (t) => {
  const a = makeSamples(1, 6000);
  const b = makeSamples(2, 4000);
  const all = [...a, ...b];
  const { aggregator } = twoWorkers(a, b);
  const report = aggregator.report();

  t.equal(report.workers, 2);
  t.equal(report.requests.total, 10_000);
  t.same(report.requests.byStatus, statusCounts(all));
  t.equal(report.requests.inFlight, 0);
  checkLatency(t, 'overall', report.latencyMs, all.map((s) => s.micros), 1 / 1024);

  const byUpstream = countBy(all, (s) => s.upstream);
  t.same(Object.keys(report.upstreams).sort(), [...byUpstream.keys()].sort());
  for (const [upstream, samples] of byUpstream) {
    const series = report.upstreams[upstream]!;
    t.equal(series.requests, samples.length, `${upstream} requests`);
    t.same(series.byStatus, statusCounts(samples), `${upstream} statuses`);
    checkLatency(t, upstream, series.latencyMs, samples.map((s) => s.micros), 1 / 128);
  }
  const byRoute = countBy(all, (s) => s.routeKey);
  t.same(Object.keys(report.endpoints).sort(), [...byRoute.keys()].sort());
  for (const [route, samples] of byRoute) {
    t.equal(report.endpoints[route]!.requests, samples.length, `${route} requests`);
    t.same(report.endpoints[route]!.byStatus, statusCounts(samples));
    checkLatency(t, route, report.endpoints[route]!.latencyMs, samples.map((s) => s.micros), 1 / 128);
  }
  t.same(JSON.parse(JSON.stringify(report)), report, 'report is plain JSON');
});

t.test('a worker recording with the JS histogram merges with WebAssembly ones', async (t) => {
  const a = makeSamples(3, 1500);
  const b = makeSamples(4, 1500);
  const { aggregator } = twoWorkers(a, b, { wasmB: false });
  const report = aggregator.report();
  t.equal(report.requests.total, 3000);
  checkLatency(t, 'overall', report.latencyMs, [...a, ...b].map((s) => s.micros), 1 / 1024);
});

t.test('deltas do not double count across repeated takeDelta()', async (t) => {
  const worker = new MetricsRecorder();
  const aggregator = new MetricsAggregator();
  worker.requestFinished('GET /a', 'http://u:1', 200, 1000);
  const first = worker.takeDelta();
  t.equal(first.overall.requests, 1);
  t.same(structuredClone(first), first, 'structured-clone safe');
  aggregator.addDelta(1, first);
  for (let i = 0; i < 3; i++) {
    const empty = worker.takeDelta();
    t.same(empty, { version: 1, inFlight: 0, overall: { requests: 0, byStatus: {}, latencySumMicros: 0, latencyMaxMicros: 0, histogram: '' }, upstreams: {}, endpoints: {} });
    aggregator.addDelta(1, empty);
  }
  worker.requestFinished('GET /a', 'http://u:1', 500, 3000);
  aggregator.addDelta(1, worker.takeDelta());
  const report = aggregator.report();
  t.equal(report.requests.total, 2);
  t.same(report.requests.byStatus, { 200: 1, 500: 1 });
  t.same(report.endpoints['GET /a']!.byStatus, { 200: 1, 500: 1 });
  t.equal(report.latencyMs.count, 2);
  t.equal(report.latencyMs.max, 3);
  t.equal(report.latencyMs.p50, 1);
});

t.test('in-flight gauge: latest per live worker; workerGone keeps counted requests', async (t) => {
  const w1 = new MetricsRecorder();
  const w2 = new MetricsRecorder();
  const aggregator = new MetricsAggregator();
  for (let i = 0; i < 3; i++) w1.requestStarted();
  for (let i = 0; i < 2; i++) w2.requestStarted();
  w1.requestFinished(null, null, 404, 10);
  aggregator.addDelta(1, w1.takeDelta());
  aggregator.addDelta(2, w2.takeDelta());
  t.equal(aggregator.report().requests.inFlight, 4);
  aggregator.addDelta(1, w1.takeDelta());
  t.equal(aggregator.report().requests.inFlight, 4, 'a gauge, not a sum of deltas');
  aggregator.workerGone(1);
  let report = aggregator.report();
  t.equal(report.requests.inFlight, 2);
  t.equal(report.requests.total, 1, 'its requests stay counted');
  w1.requestFinished(null, null, 200, 10);
  aggregator.addDelta(1, w1.takeDelta()); // a message that was already on its way
  report = aggregator.report();
  t.equal(report.requests.inFlight, 2, 'a late delta does not bring the gauge back');
  t.equal(report.requests.total, 2, 'but its requests count');
});

t.test('WebSocket gauge: a dead worker\'s connections leave the gauge; the counters keep what was counted', async (t) => {
  const w1 = new MetricsRecorder();
  const w2 = new MetricsRecorder();
  const aggregator = new MetricsAggregator();
  aggregator.addDelta(1, { ...w1.takeDelta(), counters: { 'websocket.opened': 3, 'websocket.closed': 1 } });
  aggregator.addDelta(2, { ...w2.takeDelta(), counters: { 'websocket.opened': 2 } });
  t.equal((aggregator.report().websocket as { connections: number }).connections, 4);
  aggregator.workerGone(1);
  const report = aggregator.report().websocket as { connections: number; opened: number; closed: number };
  t.equal(report.connections, 2, 'the dead worker\'s 2 open connections are gone from the gauge');
  t.same([report.opened, report.closed], [5, 1], 'opened and closed only grow: opened - closed exceeds the gauge by the connections lost');
  aggregator.addDelta(1, { ...w1.takeDelta(), counters: { 'websocket.closed': 1 } }); // already on its way
  t.equal((aggregator.report().websocket as { connections: number }).connections, 2, 'a late delta does not change the gauge');
});

t.test('odd inputs are taken, not thrown', async (t) => {
  const worker = new MetricsRecorder();
  worker.requestFinished(null, null, 0, -5);
  worker.requestFinished(null, null, 999, NaN);
  worker.requestFinished(null, null, 200, 1e12);
  worker.requestFinished(null, null, 200, 12.4);
  const aggregator = new MetricsAggregator();
  aggregator.addDelta(1, worker.takeDelta());
  const report = aggregator.report();
  t.same(report.requests.byStatus, { 0: 2, 200: 2 });
  t.equal(report.latencyMs.max, 1e9, 'exact past the histograms\' range, not capped');
  t.equal(report.latencyMs.p99, 1e9, 'a percentile among them is the max');
  t.equal(report.latencyMs.count, 4);
  t.throws(() => aggregator.addDelta(1, {} as MetricsDelta), TypeError);
});

t.test('extras, uptime, empty report', async (t) => {
  let now = 5_000;
  const aggregator = new MetricsAggregator(() => now);
  now += 1234;
  aggregator.setExtra('lastReload', { at: '2026-01-01T00:00:00Z', ok: true });
  t.throws(() => aggregator.setExtra('requests', 1));
  const report = aggregator.report();
  t.equal(report.uptimeSeconds, 1.234);
  t.same(report.lastReload, { at: '2026-01-01T00:00:00Z', ok: true });
  t.same(report.latencyMs, { p50: 0, p90: 0, p99: 0, p999: 0, max: 0, mean: 0, count: 0, sum: 0 });
  t.same(report.requests, { total: 0, byStatus: {}, inFlight: 0 });
  aggregator.setExtra('lastReload', undefined);
  t.notOk('lastReload' in aggregator.report());
  t.ok(parsePrometheus(aggregator.prometheus()), 'empty exposition parses');
});


t.test('Prometheus exposition parses strictly and agrees with the JSON report', async (t) => {
  // A frozen clock: the report and the exposition are two readings, and a real clock can tick between them.
  const { aggregator, workers } = twoWorkers(makeSamples(5, 3000), makeSamples(6, 2000), { now: () => 1_000_000 });
  workers[0]!.requestStarted();
  aggregator.addDelta(1, workers[0]!.takeDelta());
  aggregator.setExtra('breakers', () => ({
    'http://10.0.0.1:8080': { state: 'open', failures: 50, endpoints: { 'GET /users/{id}': { state: 'half-open', failures: 2 } } },
  }));
  const report: MetricsReport = aggregator.report();
  const text = aggregator.prometheus();
  t.equal(PROMETHEUS_CONTENT_TYPE, 'text/plain; version=0.0.4; charset=utf-8');
  const families = parsePrometheus(text);

  t.equal(families.get('gateway_workers')?.type, 'gauge');
  t.equal(sampleValue(families, 'gateway_workers', 'gateway_workers', {}), report.workers);
  t.equal(sampleValue(families, 'gateway_in_flight_requests', 'gateway_in_flight_requests', {}), 1);
  t.equal(sampleValue(families, 'gateway_uptime_seconds', 'gateway_uptime_seconds', {}), report.uptimeSeconds);
  t.equal(families.get('gateway_requests_total')?.type, 'counter');
  for (const [status, n] of Object.entries(report.requests.byStatus)) {
    t.equal(sampleValue(families, 'gateway_requests_total', 'gateway_requests_total', { status }), n, `status ${status}`);
  }
  // The summaries with lifetime quantiles became histograms (aggregatable across instances, usable
  // with rate()); per-endpoint counters carry method and route as two labels instead of one packed one.
  t.equal(families.get('gateway_request_duration_seconds')?.type, 'histogram');
  let total = 0;
  for (const [key, s] of Object.entries(report.endpoints)) {
    const space = key.indexOf(' ');
    const endpoint = { method: key.slice(0, space), route: key.slice(space + 1) };
    for (const [status, n] of Object.entries(s.byStatus)) {
      t.equal(sampleValue(families, 'gateway_route_requests_total', 'gateway_route_requests_total', { ...endpoint, status }), n, `${JSON.stringify(key)} ${status}`);
    }
    const counts = families.get('gateway_request_duration_seconds')!.samples.filter((x) => x.name === 'gateway_request_duration_seconds_count' && x.labels.method === endpoint.method && x.labels.route === endpoint.route);
    t.equal(counts.reduce((a, x) => a + x.value, 0), s.latencyMs.count, `${JSON.stringify(key)} histogram counts over status classes`);
    total += s.requests;
  }
  t.equal(families.get('gateway_route_requests_total')!.samples.reduce((a, s) => a + s.value, 0), total, 'route counter samples sum up');
  total = 0;
  for (const [key, s] of Object.entries(report.upstreams)) {
    for (const [status, n] of Object.entries(s.byStatus)) {
      t.equal(sampleValue(families, 'gateway_upstream_requests_total', 'gateway_upstream_requests_total', { upstream: key, status }), n, `${key} ${status}`);
    }
    total += s.requests;
  }
  t.equal(families.get('gateway_upstream_requests_total')!.samples.reduce((a, s) => a + s.value, 0), total, 'upstream counter samples sum up');
  t.ok(Object.keys(report.endpoints).includes('GET /odd\nkey'), 'an escaped key round-trips');
  t.equal(sampleValue(families, 'gateway_circuit_breaker_open', 'gateway_circuit_breaker_open', { upstream: 'http://10.0.0.1:8080', method: '', route: '' }), 1);
  t.equal(
    sampleValue(families, 'gateway_circuit_breaker_failures', 'gateway_circuit_breaker_failures', { upstream: 'http://10.0.0.1:8080', method: 'GET', route: '/users/{id}' }),
    2,
  );
  t.same(report.breakers, { 'http://10.0.0.1:8080': { state: 'open', failures: 50, endpoints: { 'GET /users/{id}': { state: 'half-open', failures: 2 } } } }, 'a lazy extra is rendered');

  t.throws(() => parsePrometheus('x{a="b\\q"} 1\n'), 'the parser itself is strict');
  t.throws(() => parsePrometheus('# HELP x h\n# TYPE x counter\nx 1\n'), 'counter without _total');
});

t.test('micro-bench: ns per requestFinished, WebAssembly vs JS histograms (informational)', async (t) => {
  const rnd = lcg(9);
  const latencies = Float64Array.from({ length: 4096 }, () => 50 + Math.floor(rnd() ** 3 * 200_000));
  const routes = ['GET /users/{id}', 'POST /users', 'GET /items/{id}', 'DELETE /users/{id}'];
  for (const useWebAssembly of [true, false]) {
    const recorder = new MetricsRecorder({ useWebAssembly });
    const n = 200_000;
    const run = () => {
      for (let i = 0; i < n; i++) {
        recorder.requestStarted();
        recorder.requestFinished(routes[i & 3]!, 'http://10.0.0.1:8080', 200, latencies[i & 4095]!);
      }
    };
    run();
    recorder.takeDelta();
    const started = process.hrtime.bigint();
    run();
    const ns = Number(process.hrtime.bigint() - started) / n;
    const deltaStarted = process.hrtime.bigint();
    const delta = recorder.takeDelta();
    const deltaMicros = Number(process.hrtime.bigint() - deltaStarted) / 1000;
    t.equal(delta.overall.requests, n);
    t.comment(
      `${useWebAssembly ? 'WebAssembly' : 'JS'}: ${ns.toFixed(1)} ns per requestStarted+requestFinished (3 histograms); ` +
        `takeDelta with 6 series ${deltaMicros.toFixed(0)} µs, ${JSON.stringify(delta).length} bytes`,
    );
  }
});

t.test('a series report is rendered again only after a delta changed that series', async (t) => {
  const worker = new MetricsRecorder();
  const aggregator = new MetricsAggregator();
  worker.requestFinished('GET /busy', 'http://u:1', 200, 1000);
  worker.requestFinished('GET /quiet', 'http://u:1', 200, 2000);
  aggregator.addDelta(1, ship(worker.takeDelta()));
  const first = aggregator.report();
  worker.requestFinished('GET /busy', 'http://u:1', 503, 9000);
  aggregator.addDelta(1, ship(worker.takeDelta()));
  const second = aggregator.report();
  t.same(second.endpoints['GET /busy']!.byStatus, { 200: 1, 503: 1 });
  t.equal(second.endpoints['GET /busy']!.latencyMs.max, 9);
  t.equal(second.endpoints['GET /busy']!.latencyMs.count, 2);
  t.equal(second.endpoints['GET /quiet'], first.endpoints['GET /quiet'], 'the quiet endpoint reuses its rendered report');
  t.not(second.endpoints['GET /busy'], first.endpoints['GET /busy']);
  t.equal(first.endpoints['GET /busy']!.requests, 1, 'an earlier report is not changed afterwards');
  t.equal(second.requests.total, 3);
  // The Prometheus text of the quiet endpoint comes from its cached lines; the busy one's is new.
  const lines = (text: string, endpoint: string) => text.split('\n').filter((l) => l.includes(`method="GET",route="${endpoint.slice(4)}"`));
  const before = aggregator.prometheus(first);
  const after = aggregator.prometheus(second);
  t.same(lines(after, 'GET /quiet'), lines(before, 'GET /quiet'));
  t.ok(lines(after, 'GET /quiet').length >= 6, 'the quiet endpoint still has its counter and histogram lines');
  t.ok(lines(after, 'GET /busy').includes('gateway_route_requests_total{method="GET",route="/busy",status="503"} 1'));
  t.notOk(lines(before, 'GET /busy').some((l) => l.includes('status="503"')));
  t.match(after, /gateway_request_duration_seconds_count\{method="GET",route="\/busy",status_class="5xx"\} 1\n/);
  t.match(after, /gateway_request_duration_seconds_count\{method="GET",route="\/busy",status_class="2xx"\} 1\n/);
  t.equal(aggregator.prometheus(second), after, 'rendering the same report twice gives the same text');
});

t.test('one series report rendered under two names gets the lines of each name', async (t) => {
  const worker = new MetricsRecorder();
  const aggregator = new MetricsAggregator();
  worker.requestFinished('GET /a', 'http://u:1', 200, 1000);
  aggregator.addDelta(1, ship(worker.takeDelta()));
  const report = aggregator.report();
  const series = report.endpoints['GET /a']!;
  const text = aggregator.prometheus({ ...report, upstreams: { 'http://same:1': series }, endpoints: { 'GET /a': series, 'GET /b': series } });
  t.ok(text.includes('gateway_upstream_requests_total{upstream="http://same:1",status="200"} 1'));
  t.ok(text.includes('gateway_route_requests_total{method="GET",route="/a",status="200"} 1'));
  t.ok(text.includes('gateway_route_requests_total{method="GET",route="/b",status="200"} 1'));
});
