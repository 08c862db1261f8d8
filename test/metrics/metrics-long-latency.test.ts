// Latencies past the histograms' 60 s of bounds: /metrics keeps their sum, mean and max exact (JSON
// and Prometheus `_sum`), a percentile that falls among them is no lower than they are, and no finite
// `_bucket` counts them, a bound of 60 s included (docs/observability.md, "_sum"). Workers' recorders,
// shipped deltas and the primary's merge, as in the running gateway; a real request this long would
// make the suite a minute slower.
import t from 'tap';
import { MetricsAggregator } from '../../src/metrics/aggregate.js';
import { MetricsRecorder } from '../../src/metrics/recorder.js';
import { parsePrometheus, sampleValue } from '../helpers/prometheus.js';

const SECOND = 1_000_000;
// Measured latencies, µs: one quick, two past 60 s, one past the histograms' highest trackable value.
const latencies = [1500.25, 63.0125 * SECOND, 61 * SECOND, 125 * SECOND];
const upstreamTimes = [1200, 62.5 * SECOND, 60.5 * SECOND, 124.9 * SECOND];

const aggregator = new MetricsAggregator(() => 0);
aggregator.setHistogramBuckets([1, 30, 60]);
const workers = [new MetricsRecorder(), new MetricsRecorder()];
latencies.forEach((micros, i) => {
  const worker = workers[i % 2]!;
  worker.requestStarted();
  worker.routeFinished(0, 'GET', '/reports/{id}', 'http://10.0.0.1:8080', 200, micros, upstreamTimes[i]!);
});
workers.forEach((worker, i) => aggregator.addDelta(i + 1, structuredClone(worker.takeDelta())));

const exactSum = (values: number[]) => values.reduce((sum, v) => sum + Math.ceil(v), 0);

t.test('JSON: sum, mean and max exact; p99 at the max', async (t) => {
  const report = aggregator.report();
  for (const series of [report.latencyMs, report.endpoints['GET /reports/{id}']!.latencyMs, report.upstreams['http://10.0.0.1:8080']!.latencyMs]) {
    t.equal(series.count, 4);
    t.equal(series.sum, exactSum(latencies) / 1000, 'sum');
    t.equal(series.max, 125_000, 'max');
    t.equal(series.mean, Math.round(exactSum(latencies) / 4) / 1000, 'mean, to the microsecond');
    t.equal(series.p99, 125_000, 'p99 is the max, not the histograms\' ceiling');
    t.ok(series.p50 >= 61_000 && series.p50 <= 61_000 * 1.01, `p50 ${series.p50} is 61 s to 1 %`);
  }
});

t.test('Prometheus: exact _sum; only +Inf counts what took over 60 s', async (t) => {
  const families = parsePrometheus(aggregator.prometheus());
  const route = { method: 'GET', route: '/reports/{id}', status_class: '2xx' };
  const requests = 'gateway_request_duration_seconds';
  t.equal(sampleValue(families, requests, `${requests}_sum`, route), exactSum(latencies) / SECOND);
  t.equal(sampleValue(families, requests, `${requests}_count`, route), 4);
  const upstream = { upstream: 'http://10.0.0.1:8080' };
  const upstreams = 'gateway_upstream_duration_seconds';
  t.equal(sampleValue(families, upstreams, `${upstreams}_sum`, upstream), exactSum(upstreamTimes) / SECOND);
  for (const [family, labels] of [[requests, route], [upstreams, upstream]] as const) {
    const buckets = families.get(family)!.samples.filter((s) => s.name === `${family}_bucket` && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
    t.same(
      buckets.map((s) => [s.labels.le, s.value]),
      [['1.003519', 1], ['30.015487', 1], ['60.030975', 1], ['+Inf', 4]],
      `${family}: the 60 s bound does not count the longer ones`,
    );
  }
});
