import { MetricsAggregator } from '../metrics/aggregate.js';
import type { MetricsDelta } from '../metrics/delta.js';
import { ProcessMetricsMerger } from '../metrics/process-metrics.js';
import { buildInfo } from '../builtins/build-info.js';
import type { Logger } from '../log.js';
import type { MetricsReportMessage } from './messages.js';

export interface MetricsHubOptions {
  /** Broadcasts happen at most this often, and only when a delta arrived. */
  broadcastIntervalMs?: number;
  /** Re-broadcast at least this often anyway, so time-based fields such as uptime stay fresh. */
  refreshIntervalMs?: number;
  broadcast: (message: MetricsReportMessage) => void;
  log: Logger;
}

/** The primary's side of /metrics: merges worker deltas and pushes the rendered report to every worker. */
export class MetricsHub {
  private readonly aggregator = new MetricsAggregator();
  /** process_* and nodejs_* of the primary and every worker (refreshed with the report). */
  private readonly processes = new ProcessMetricsMerger(() => (this.changed = true));
  private uws = '';
  private changed = true;
  private lastBroadcast = 0;
  private rendered: MetricsReportMessage | null = null;
  private readonly timer: NodeJS.Timeout;
  private readonly refreshIntervalMs: number;
  private readonly broadcast: (message: MetricsReportMessage) => void;
  private readonly log: Logger;
  private prometheusExtra: () => string = () => '';

  constructor({ broadcastIntervalMs = 250, refreshIntervalMs = 1000, broadcast, log }: MetricsHubOptions) {
    this.broadcast = broadcast;
    this.log = log;
    this.refreshIntervalMs = refreshIntervalMs;
    this.timer = setInterval(() => this.tick(), broadcastIntervalMs);
    this.timer.unref();
  }

  addDelta(workerId: number, delta: MetricsDelta): void {
    try {
      this.aggregator.addDelta(workerId, delta);
      this.changed = true;
      if (delta.process !== undefined) this.processes.set(workerId, delta.process);
      if (typeof delta.uws === 'string' && delta.uws !== this.uws) {
        this.uws = delta.uws;
        this.aggregator.setBuildLabels({ version: buildInfo().version, node: process.version, uws: this.uws });
      }
    } catch (err) {
      this.log.error({ err, worker: workerId }, 'metrics delta rejected');
    }
  }

  workerGone(workerId: number): void {
    this.aggregator.workerGone(workerId);
    this.processes.gone(workerId);
    this.changed = true;
  }

  /** `metrics.histogramBucketsS` of the config in service. */
  setHistogramBuckets(boundsS: readonly number[]): void {
    this.aggregator.setHistogramBuckets(boundsS);
    this.changed = true;
  }

  setWorkerCount(count: number): void {
    this.aggregator.setWorkerCount(count);
    this.changed = true;
  }

  setExtra(key: string, value: unknown): void {
    this.aggregator.setExtra(key, value);
    this.changed = true;
  }

  /** Text appended to the Prometheus rendering (e.g. the TLS certificates' expiry gauge), called at each render. */
  setPrometheusExtra(render: () => string): void {
    this.prometheusExtra = render;
    this.changed = true;
  }

  /** Something a lazy extra shows changed: render again at the next tick. */
  touch(): void {
    this.changed = true;
  }

  /** The latest report, for a worker that just started. */
  latest(): MetricsReportMessage {
    return (this.rendered ??= this.render());
  }

  stop(): void {
    clearInterval(this.timer);
    this.processes.stop();
  }

  private tick(): void {
    const now = Date.now();
    if (!this.changed && now - this.lastBroadcast < this.refreshIntervalMs) return;
    // The primary's own process metrics move on their own: read again (at most every
    // PROCESS_METRICS_INTERVAL_MS, src/metrics/process-metrics.ts).
    if (now - this.lastBroadcast >= this.refreshIntervalMs) this.processes.refresh();
    this.changed = false;
    this.lastBroadcast = now;
    this.rendered = this.render();
    this.broadcast(this.rendered);
  }

  private render(): MetricsReportMessage {
    const report = this.aggregator.report();
    return { type: 'metrics', json: JSON.stringify(report), prometheus: this.aggregator.prometheus(report) + this.processes.text + this.prometheusExtra() };
  }
}
