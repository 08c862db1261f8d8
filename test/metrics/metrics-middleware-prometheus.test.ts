// The Prometheus exposition of middleware, listener and store metrics parses strictly and says what the
// JSON report says.
import t from 'tap';
import { MetricsAggregator } from '../../src/metrics/aggregate.js';
import { counterPart } from '../../src/metrics/counters.js';
import { MetricsRecorder } from '../../src/metrics/recorder.js';
import { parsePrometheus, sampleValue } from '../helpers/prometheus.js';

t.test('middleware, listener and store counters: JSON nesting and Prometheus families agree', async (t) => {
  const aggregator = new MetricsAggregator(() => 1_000);
  const delta = new MetricsRecorder().takeDelta();
  delta.counters = {
    'middleware.auth.admitted': 7,
    'middleware.auth.rejected.401': 3,
    'middleware.limit.rejected.429': 2,
    'middleware.limit.slaMisses': 1,
    'middleware.cache.hits': 5,
    'middleware.cache.answered.200': 5,
    'middleware.cache.bytesStored': 4096,
    'listeners.shadow.sent': 4,
    'listeners.shadow.mismatched': 1,
  };
  aggregator.addDelta(1, delta);
  aggregator.addDelta(2, { ...delta, counters: { 'middleware.cache.bytesStored': -1024, 'middleware.auth.admitted': 1 } });
  aggregator.setExtra('kvStores', () => ({ local: { state: 'ready', readyWorkers: 2 }, shared: { state: 'down', readyWorkers: 0, commands: 10, timeouts: 2 } }));
  const report = aggregator.report() as Record<string, any>;
  t.same(report.middleware.auth, { admitted: 8, rejected: { 401: 3 } });
  t.equal(report.middleware.cache.bytesStored, 3072, 'a gauge kept as deltas sums to the current total');
  const families = parsePrometheus(aggregator.prometheus());
  t.equal(sampleValue(families, 'gateway_middleware_answers_total', 'gateway_middleware_answers_total', { middleware: 'auth', outcome: 'rejected', status: '401' }), 3);
  t.equal(sampleValue(families, 'gateway_middleware_answers_total', 'gateway_middleware_answers_total', { middleware: 'cache', outcome: 'answered', status: '200' }), 5);
  // One family per figure (no `event` label mixing admissions, SLA misses and cache hits), snake_case names.
  t.equal(sampleValue(families, 'gateway_middleware_sla_misses_total', 'gateway_middleware_sla_misses_total', { middleware: 'limit' }), 1);
  t.equal(sampleValue(families, 'gateway_middleware_admitted_total', 'gateway_middleware_admitted_total', { middleware: 'auth' }), 8);
  t.equal(sampleValue(families, 'gateway_cache_lookups_total', 'gateway_cache_lookups_total', { middleware: 'cache', result: 'hit' }), 5);
  t.equal(sampleValue(families, 'gateway_cache_stored_bytes', 'gateway_cache_stored_bytes', { middleware: 'cache' }), 3072);
  t.equal(sampleValue(families, 'gateway_listener_mismatched_total', 'gateway_listener_mismatched_total', { listener: 'shadow' }), 1);
  t.equal(sampleValue(families, 'gateway_listener_sent_total', 'gateway_listener_sent_total', { listener: 'shadow' }), 4);
  t.equal(sampleValue(families, 'gateway_store_up', 'gateway_store_up', { store: 'local' }), 1);
  t.equal(sampleValue(families, 'gateway_store_up', 'gateway_store_up', { store: 'shared' }), 0);
  t.equal(sampleValue(families, 'gateway_store_timeouts_total', 'gateway_store_timeouts_total', { store: 'shared' }), 2);
  t.equal(sampleValue(families, 'gateway_store_commands_total', 'gateway_store_commands_total', { store: 'shared' }), 10);
});

t.test('an id is one level of the report whatever it holds: dots, __proto__, constructor', async (t) => {
  const aggregator = new MetricsAggregator(() => 1_000);
  const delta = new MetricsRecorder().takeDelta();
  delta.counters = {};
  for (const id of ['limit', 'limit.v2', '__proto__', 'constructor', 'hasOwnProperty']) {
    delta.counters[`middleware.${counterPart(id)}.admitted`] = 3;
    delta.counters[`middleware.${counterPart(id)}.rejected.429`] = 2;
    delta.counters[`listeners.${counterPart(id)}.sent`] = 4;
  }
  aggregator.addDelta(1, delta);
  const report = JSON.parse(JSON.stringify(aggregator.report())) as Record<string, any>;
  t.equal(({} as Record<string, unknown>).admitted, undefined, 'Object.prototype untouched');
  for (const id of ['limit', 'limit.v2', '__proto__', 'constructor', 'hasOwnProperty']) {
    t.same(Object.getOwnPropertyDescriptor(report.middleware, id)?.value, { admitted: 3, rejected: { 429: 2 } }, `middleware ${id}`);
    t.same(Object.getOwnPropertyDescriptor(report.listeners, id)?.value, { sent: 4 }, `listener ${id}`);
  }
  t.same(Object.keys(report.middleware).sort(), ['__proto__', 'constructor', 'hasOwnProperty', 'limit', 'limit.v2'].sort());
  const families = parsePrometheus(aggregator.prometheus());
  for (const id of ['limit', 'limit.v2', '__proto__', 'constructor']) {
    t.equal(sampleValue(families, 'gateway_middleware_answers_total', 'gateway_middleware_answers_total', { middleware: id, outcome: 'rejected', status: '429' }), 2, `429s of ${id}`);
    t.equal(sampleValue(families, 'gateway_middleware_admitted_total', 'gateway_middleware_admitted_total', { middleware: id }), 3, `admitted by ${id}`);
    t.equal(sampleValue(families, 'gateway_listener_sent_total', 'gateway_listener_sent_total', { listener: id }), 4, `sent by ${id}`);
  }
});
