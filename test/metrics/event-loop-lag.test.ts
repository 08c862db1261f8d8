// The event-loop lag figures of a running gateway are the delay beyond the 20 ms sampling interval:
// an idle gateway reports a lag well under the interval (they were at least 20 ms, always).
import t from 'tap';
import { EVENT_LOOP_PRECISION_MS } from '../../src/metrics/process-metrics.js';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { parsePrometheus } from '../helpers/prometheus.js';

const upstream = await startUpstream(t, { name: 'a', handle: (_req, res) => res.end('{}') });
const gateway = await startGateway(t, {
  config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }], { accessLog: { enabled: false } }),
  waitFor: (line) => line.msg === 'gateway operational',
  workers: 1,
});

t.test('an idle gateway reports an event-loop lag well under the sampling interval', async (t) => {
  const interval = EVENT_LOOP_PRECISION_MS / 1000;
  const seen: string[] = [];
  // Each process reads its figures every 5 s; the first windows can hold the start's own stalls (and a
  // busy test machine's), so any reading within 30 s will do. Before, none could: every sample was at
  // least the interval (p50 0.0201, min 0.019 on an idle gateway).
  const figures = await eventually(
    async () => {
      const families = parsePrometheus((await httpRequest(gateway.port, '/metrics?format=prometheus')).body);
      const figure = (name: string): number => families.get(`nodejs_eventloop_lag_${name}_seconds`)?.samples[0]?.value ?? NaN;
      const read = { min: figure('min'), p50: figure('p50'), mean: figure('mean') };
      seen.push(JSON.stringify(read));
      return Number.isFinite(read.mean) && read.min >= 0 && read.min < interval / 4 && read.p50 >= 0 && read.p50 < interval / 4 ? read : undefined;
    },
    30_000,
    500,
    'a lag well under the interval',
  ).catch((error: unknown) => {
    t.comment(`readings: ${[...new Set(seen)].join(' ')}`);
    throw error;
  });
  t.ok(figures.p50 < interval / 4, `p50 ${figures.p50} s, min ${figures.min} s, mean ${figures.mean} s`);
});
