// The primary's merge of process_* / nodejs_* snapshots (prom-client's aggregation) renders text that
// a strict parser of the exposition format accepts, NaN values included.
import t from 'tap';
import { ProcessMetricsMerger, type ProcessSnapshot } from '../../src/metrics/process-metrics.js';
import { parsePrometheus } from '../helpers/prometheus.js';

function rendered(merger: ProcessMetricsMerger): Promise<string> {
  return new Promise((resolve) => {
    const timer = setInterval(() => {
      if (merger.text.includes('gateway_test_figure')) {
        clearInterval(timer);
        resolve(merger.text);
      }
    }, 10);
  });
}

t.test('a NaN figure is written NaN, as the text format spells it (prom-client writes "Nan")', async (t) => {
  const merger = new ProcessMetricsMerger();
  const snapshot = [
    { name: 'gateway_test_figure', help: 'A figure without a sample yet.', type: 'gauge', aggregator: 'sum', values: [{ value: NaN, labels: {} }] },
  ] as unknown as ProcessSnapshot;
  merger.set(1, snapshot);
  const text = await rendered(merger);
  t.match(text, /^gateway_test_figure NaN$/m);
  t.notMatch(text, / Nan$/m);
  const families = parsePrometheus(text);
  t.ok(Number.isNaN(families.get('gateway_test_figure')?.samples[0]?.value), 'parsed as NaN');
  t.ok(families.has('process_cpu_seconds_total'), "with the primary's own process metrics");
});
