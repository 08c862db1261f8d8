import t from 'tap';
import { MetricsAggregator } from '../../src/metrics/aggregate.js';

t.test('the last reload shows in the Prometheus output as Prometheus names its own', async (t) => {
  const metrics = new MetricsAggregator();
  t.notMatch(metrics.prometheus(), /gateway_config_last_reload/, 'nothing before the first reload');
  metrics.setExtra('tableVersion', 1);
  t.match(metrics.prometheus(), /^gateway_routing_table_version 1$/m, 'the table version from the first publish on');
  metrics.setExtra('tableVersion', 7);
  metrics.setExtra('lastReload', { version: 7, at: '2026-11-22T03:00:00.000Z', ok: false, applied: true, error: 'upstream http://a:1: template "/x/{y" (GET): unbalanced braces' });
  const text = metrics.prometheus();
  t.match(text, /^gateway_config_last_reload_successful 0$/m);
  t.match(text, /^gateway_config_last_reload_applied 1$/m);
  t.match(text, /^gateway_config_last_reload_timestamp_seconds 1795316400$/m);
  t.match(text, /^gateway_routing_table_version 7$/m);
  t.match(text, /^# TYPE gateway_config_last_reload_successful gauge$/m);
  t.equal((metrics.report() as unknown as { lastReload: { error: string } }).lastReload.error.includes('unbalanced braces'), true, 'the JSON report keeps the error text');
  metrics.setExtra('lastReload', { version: 8, at: '2026-11-22T03:00:01.000Z', ok: true, applied: true });
  t.match(metrics.prometheus(), /^gateway_config_last_reload_successful 1$/m);
});
