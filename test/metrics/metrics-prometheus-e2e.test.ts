// The Prometheus exposition of a running gateway (2 workers, real upstream, real requests) passes
// Prometheus' own checker (`promtool check metrics`, Debian package prometheus) and holds the
// histograms, process metrics of every process and build info it should.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { MetricsAggregator } from '../../src/metrics/aggregate.js';
import { MetricsRecorder } from '../../src/metrics/recorder.js';
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { parsePrometheus, sampleValue, type PromFamily } from '../helpers/prometheus.js';

const REQUESTS = 60;

const upstream = await startUpstream(t, {
  name: 'a',
  handle: (req, res) => {
    // /slow/N answers after N ms, so the histogram holds a spread of latencies.
    const wait = Number(/^\/slow\/(\d+)/.exec(req.url ?? '')?.[1] ?? 0);
    setTimeout(() => {
      res.writeHead(req.url?.startsWith('/slow/9') ? 503 : 200, { 'content-type': 'application/json' });
      res.end('{}');
    }, wait);
  },
});
const gateway = await startGateway(t, {
  config: testConfig(
    [{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/slow/{ms}' }] }],
    { metrics: { histogramBucketsS: [0.001, 0.005, 0.025, 0.1] } },
  ),
  waitFor: (line) => line.msg === 'gateway operational',
});

async function prometheusText(): Promise<string> {
  const res = await httpRequest(gateway.port, '/metrics', { headers: { accept: 'text/plain' } });
  t.equal(res.status, 200);
  return res.body;
}

function histogramCount(family: PromFamily | undefined, labels: Record<string, string>): number {
  return (family?.samples ?? [])
    .filter((s) => s.name.endsWith('_count') && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);
}

t.test('promtool accepts the exposition of a gateway under traffic', async (t) => {
  for (let i = 0; i < REQUESTS; i++) {
    const res = await httpRequest(gateway.port, `/slow/${[0, 3, 12, 40, 90][i % 5]}`);
    t.equal(res.status, i % 5 === 4 ? 503 : 200);
  }
  t.equal((await httpRequest(gateway.port, '/nowhere')).status, 404);

  const text = await eventually(
    async () => {
      const text = await prometheusText();
      const families = parsePrometheus(text);
      const routed = histogramCount(families.get('gateway_request_duration_seconds'), { method: 'GET', route: '/slow/{ms}' });
      // The unrouted 404 may have gone to the other worker, whose report can come after the routed ones.
      const unrouted = sampleValue(families, 'gateway_requests_total', 'gateway_requests_total', { status: '404' }) ?? 0;
      // Both workers' process metrics have arrived once the merged heap covers three processes' worth of spaces.
      return routed === REQUESTS && unrouted >= 1 && families.has('process_cpu_user_seconds_total') && families.has('gateway_build_info') ? text : undefined;
    },
    8000,
    100,
    'an exposition counting every request (the 404 too), with process metrics and build info',
  );

  const check = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  t.equal(check.error, undefined, 'promtool runs (Debian package prometheus; .ci/run installs it)');
  t.equal(check.status, 0, `promtool check metrics: ${check.stdout}${check.stderr}`);

  const families = parsePrometheus(text);
  const requests = families.get('gateway_request_duration_seconds')!;
  t.equal(requests.type, 'histogram');
  t.equal(histogramCount(requests, { status_class: '5xx' }), REQUESTS / 5, 'the 503s are their own status class');
  const buckets = requests.samples.filter((s) => s.name.endsWith('_bucket') && s.labels.status_class === '2xx');
  t.same(
    buckets.map((s) => s.labels.le),
    ['0.001003', '0.005023', '0.025087', '0.100351', '+Inf'],
    'configured bounds, each moved up to its HDR bucket top',
  );
  for (let i = 1; i < buckets.length; i++) t.ok(buckets[i]!.value >= buckets[i - 1]!.value, `cumulative at le=${buckets[i]!.labels.le}`);
  // 0, 3, 12, 40 ms upstream waits: the 40 ms ones cannot be at or below 25 ms (on a loaded machine others may join them).
  t.ok(buckets[buckets.length - 1]!.value - buckets[2]!.value >= REQUESTS / 5, 'the 40 ms requests are above 25 ms');

  const upstreamCount = histogramCount(families.get('gateway_upstream_duration_seconds'), { upstream: upstream.location });
  t.equal(upstreamCount, REQUESTS, 'every forwarded request has an upstream answer time');
  const upstreamSum = sampleValue(families, 'gateway_upstream_duration_seconds', 'gateway_upstream_duration_seconds_sum', { upstream: upstream.location })!;
  const requestSum = requests.samples.filter((s) => s.name.endsWith('_sum')).reduce((a, s) => a + s.value, 0);
  t.ok(upstreamSum > 0 && upstreamSum <= requestSum, `upstream time ${upstreamSum} s is within request time ${requestSum} s`);

  const build = families.get('gateway_build_info')!.samples[0]!;
  t.equal(build.value, 1);
  t.equal(build.labels.node, process.version);
  t.match(build.labels.uws, /^@?[\w./-]+@\d+\.\d+/, 'the native build that serves, name@version');
  t.match(build.labels.version, /^\d+\.\d+\.\d+/);

  for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_heap_size_used_bytes', 'nodejs_eventloop_lag_seconds']) {
    t.ok(families.has(name), `${name} is exposed`);
  }
  t.ok(sampleValue(families, 'process_resident_memory_bytes', 'process_resident_memory_bytes', {})! > 3 * 10 * 1024 * 1024, 'resident memory summed over primary and two workers');
  t.equal(sampleValue(families, 'gateway_route_requests_total', 'gateway_route_requests_total', { method: 'GET', route: '/slow/{ms}', status: '503' }), REQUESTS / 5);
  t.ok((sampleValue(families, 'gateway_requests_total', 'gateway_requests_total', { status: '404' }) ?? 0) >= 1, 'the unrouted 404 is counted');
});

t.test('every metric the Grafana dashboard queries exists', async (t) => {
  const dashboard = JSON.parse(readFileSync(new URL('../../../examples/grafana/specgate-dashboard.json', import.meta.url), 'utf8')) as {
    panels: Array<{ title: string; targets: Array<{ expr: string }> }>;
  };
  // What this gateway exposes, plus the families that need middleware, breakers or failures to appear.
  const names = new Set([...parsePrometheus(await prometheusText()).keys()]);
  const aggregator = new MetricsAggregator();
  const delta = new MetricsRecorder().takeDelta();
  delta.counters = { 'middleware.cache.hits': 1, 'middleware.limit.rejected.429': 1, 'retries.afterConnectFailure': 1, 'upstreamFailures.timeouts': 1 };
  aggregator.addDelta(1, delta);
  aggregator.setExtra('breakers', () => ({ 'http://u:1': { state: 'open', failures: 5 } }));
  for (const name of parsePrometheus(aggregator.prometheus()).keys()) names.add(name);
  for (const panel of dashboard.panels) {
    for (const { expr } of panel.targets) {
      const used = [...expr.matchAll(/\b((?:gateway|process|nodejs)_[a-z0-9_]+)/g)].map((m) => m[1]!.replace(/_(bucket|sum|count)$/, ''));
      t.ok(used.length > 0, `${panel.title}: queries a metric`);
      for (const name of used) t.ok(names.has(name), `${panel.title}: ${name} is exposed`);
    }
  }
});

t.test('the JSON report keeps its shape', async (t) => {
  const res = await httpRequest(gateway.port, '/metrics');
  const report = JSON.parse(res.body) as Record<string, unknown>;
  t.same(Object.keys(report).slice(0, 6), ['uptimeSeconds', 'workers', 'requests', 'latencyMs', 'upstreams', 'endpoints']);
  t.notOk('process' in report || 'histograms' in report, 'no new top-level fields');
});
