// Property: latencies recorded by several workers (HDR histograms, shipped as deltas and merged the
// way the primary merges them) come out of the Prometheus exposition with every `_bucket{le}` equal
// to the number of recorded latencies at or below `le`, for the default bounds and random ones.
import t from 'tap';
import fc from 'fast-check';
import { MetricsAggregator } from '../../src/metrics/aggregate.js';
import { MetricsRecorder } from '../../src/metrics/recorder.js';
import { bucketEdgesMicros, bucketProblems, DEFAULT_BUCKETS_S } from '../../src/metrics/buckets.js';
import { parsePrometheus, type PromFamily } from '../helpers/prometheus.js';

interface Sample {
  worker: number;
  route: number;
  status: number;
  /** Request latency and upstream answer time, microseconds (fractional, as measured). */
  micros: number;
  upstreamMicros: number;
}

const ROUTES = [['GET', '/users/{id}'], ['POST', '/orders'], ['GET', '/files/{path}']] as const;
const UPSTREAMS = ['http://10.0.0.1:8080', 'http://10.0.0.2:8080'];
const STATUSES = [200, 204, 301, 404, 429, 500, 503];

// Values right at, just above and just below the default edges, where an off-by-one would show.
const nearEdges = bucketEdgesMicros(DEFAULT_BUCKETS_S).flatMap((e) => [e, e + 1, e - 0.5, e + 0.5, e + 0.001]);
const latency = fc.oneof(fc.double({ min: 0.001, max: 60_000_000, noNaN: true }), fc.constantFrom(...nearEdges), fc.integer({ min: 1, max: 300 }));

const sample = fc.record({
  worker: fc.integer({ min: 0, max: 3 }),
  route: fc.integer({ min: 0, max: ROUTES.length - 1 }),
  status: fc.constantFrom(...STATUSES),
  micros: latency,
  upstreamMicros: latency,
});

/** Ascending bounds (seconds) the config accepts. */
const bounds = fc
  .uniqueArray(fc.double({ min: 0.000001, max: 60, noNaN: true }), { minLength: 1, maxLength: 20 })
  .map((list) => list.sort((a, b) => a - b))
  .filter((list) => bucketProblems(list).length === 0);

function bucketsOf(family: PromFamily, match: Record<string, string>): Array<[number, number]> {
  return family.samples
    .filter((s) => s.name.endsWith('_bucket') && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .map((s) => [s.labels.le === '+Inf' ? Infinity : Number(s.labels.le), s.value]);
}

function atOrBelow(values: number[], leSeconds: number): number {
  if (leSeconds === Infinity) return values.length;
  const leMicros = Math.round(leSeconds * 1e6);
  return values.filter((v) => v <= leMicros).length;
}

function check(samples: Sample[], boundsS: readonly number[] | null, deltasPerWorker: number): void {
  const workers = [0, 1, 2, 3].map(() => new MetricsRecorder());
  const aggregator = new MetricsAggregator(() => 0);
  if (boundsS !== null) aggregator.setHistogramBuckets(boundsS);
  // Each worker ships several deltas (as every 200 ms), interleaved with the others'.
  const cut = Math.max(1, Math.ceil(samples.length / deltasPerWorker));
  for (let start = 0; start < samples.length; start += cut) {
    for (const s of samples.slice(start, start + cut)) {
      const [method, template] = ROUTES[s.route]!;
      workers[s.worker]!.routeFinished(s.route, method, template, UPSTREAMS[s.route % 2]!, s.status, s.micros, s.upstreamMicros);
    }
    workers.forEach((w, i) => aggregator.addDelta(i + 1, structuredClone(w.takeDelta())));
  }
  const families = parsePrometheus(aggregator.prometheus());
  const configured = boundsS ?? DEFAULT_BUCKETS_S;

  const requests = families.get('gateway_request_duration_seconds');
  for (const [r, [method, route]] of ROUTES.entries()) {
    for (const statusClass of ['2xx', '3xx', '4xx', '5xx']) {
      const values = samples.filter((s) => s.route === r && `${Math.floor(s.status / 100)}xx` === statusClass).map((s) => s.micros);
      const buckets = requests === undefined ? [] : bucketsOf(requests, { method, route, status_class: statusClass });
      if (values.length === 0) {
        if (buckets.length !== 0) throw new Error(`${method} ${route} ${statusClass}: buckets without requests`);
        continue;
      }
      if (buckets.length !== configured.length + 1) throw new Error(`${method} ${route} ${statusClass}: ${buckets.length} buckets for ${configured.length} bounds`);
      buckets.forEach(([le, count], i) => {
        // A bound is taken to the nanosecond, rounded up to whole microseconds, then to its HDR bucket's top.
        const wholeMicros = Math.ceil(Math.round(configured[i]! * 1e9) / 1e3);
        if (i < configured.length && !(le >= configured[i]! - 1e-9 && le <= (wholeMicros * 1.008) / 1e6 + 1e-12)) throw new Error(`le ${le} is not bound ${configured[i]} moved up by under 0.8 %`);
        const expected = atOrBelow(values, le);
        if (count !== expected) throw new Error(`${method} ${route} ${statusClass} le=${le}: ${count} counted, ${expected} recorded at or below`);
      });
    }
  }
  const upstreams = families.get('gateway_upstream_duration_seconds');
  UPSTREAMS.forEach((upstream, u) => {
    const values = samples.filter((s) => s.route % 2 === u).map((s) => s.upstreamMicros);
    const buckets = upstreams === undefined ? [] : bucketsOf(upstreams, { upstream });
    if (values.length === 0) return;
    for (const [le, count] of buckets) {
      const expected = atOrBelow(values, le);
      if (count !== expected) throw new Error(`${upstream} le=${le}: ${count} counted, ${expected} recorded at or below`);
    }
    if (buckets.length !== configured.length + 1) throw new Error(`${upstream}: ${buckets.length} buckets`);
  });
}

t.test('every _bucket{le} counts exactly the latencies at or below le (default bounds)', async (t) => {
  fc.assert(
    fc.property(fc.array(sample, { minLength: 1, maxLength: 300 }), fc.integer({ min: 1, max: 4 }), (samples, deltas) => check(samples, null, deltas)),
    { numRuns: 60 },
  );
  t.pass('60 runs');
});

t.test('every _bucket{le} counts exactly the latencies at or below le (random bounds)', async (t) => {
  fc.assert(
    fc.property(fc.array(sample, { minLength: 1, maxLength: 200 }), bounds, fc.integer({ min: 1, max: 3 }), (samples, b, deltas) => check(samples, b, deltas)),
    { numRuns: 60 },
  );
  t.pass('60 runs');
});

t.test('a bound is moved up to its HDR bucket top, and counting stops exactly there', async (t) => {
  const [edge] = bucketEdgesMicros([0.005]);
  t.equal(edge, 5023, '0.005 s lies in the 2-digit HDR bucket 4992..5023 µs');
  t.equal(bucketEdgesMicros([0.0001])[0], 100, 'below 256 µs buckets are single microseconds: nothing moves');
  const worker = new MetricsRecorder();
  for (const micros of [4991.5, 5000, 5023, 5023.2, 5024]) worker.routeFinished(0, 'GET', '/a', null, 200, micros);
  const aggregator = new MetricsAggregator(() => 0);
  aggregator.setHistogramBuckets([0.005]);
  aggregator.addDelta(1, worker.takeDelta());
  const text = aggregator.prometheus();
  t.match(text, /gateway_request_duration_seconds_bucket\{method="GET",route="\/a",status_class="2xx",le="0.005023"\} 3\n/, '4991.5, 5000 and 5023 µs; not 5023.2');
  t.match(text, /le="\+Inf"\} 5\n/);
});

t.test('bucket bounds: problems are named', async (t) => {
  t.same(bucketProblems([0.001, 0.01, 1]), []);
  t.match(bucketProblems([0.01, 0.001]).join(), /ascending/);
  t.match(bucketProblems([0, 1]).join(), /positive/);
  t.match(bucketProblems([1, 61]).join(), /above 60 s/);
  t.match(bucketProblems([1, 1.001]).join(), /one histogram bucket/);
  t.match(bucketProblems([]).join(), /at least one/);
});
