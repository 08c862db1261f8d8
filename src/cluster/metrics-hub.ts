import { MetricsAggregator } from '../metrics/aggregate.js';
import type { MetricsDelta } from '../metrics/delta.js';
import type { RoutedSeries } from '../metrics/routed-series.js';
import { ProcessMetricsMerger } from '../metrics/process-metrics.js';
import { buildInfo } from '../builtins/build-info.js';
import type { Logger } from '../log.js';
import type { MetricsAskMessage } from './messages.js';

export interface MetricsHubOptions {
  /** A rendered report is reused while nothing changed, but never when older than this (uptime moves on). */
  refreshIntervalMs?: number;
  log: Logger;
}

type MetricsFormat = MetricsAskMessage['format'];

interface Rendered {
  body: string;
  /** Date.now() of the render. */
  at: number;
}

/**
 * The primary's side of /metrics: merges worker deltas and renders the report when a worker asks for
 * it (a /metrics request), in the format asked. Rendering on demand, not pushed to every worker on a
 * timer: with 398 endpoints serving, the Prometheus text is about 1 MB, and rendering it and sending it
 * to every worker four times a second cost the primary 11% of a core and each worker as much again in
 * parsing it, at 40 requests a second (docs/benchmarks.md). A report is reused while nothing changed,
 * for at most refreshIntervalMs.
 */
export class MetricsHub {
  private readonly aggregator = new MetricsAggregator();
  /** process_* and nodejs_* of the primary and every worker (rendered in the background, PROCESS_METRICS_INTERVAL_MS). */
  private readonly processes = new ProcessMetricsMerger(() => this.touch());
  private uws = '';
  private readonly rendered: Record<MetricsFormat, Rendered | null> = { json: null, prometheus: null };
  private readonly refreshIntervalMs: number;
  private readonly log: Logger;
  private prometheusExtra: () => string = () => '';

  constructor({ refreshIntervalMs = 1000, log }: MetricsHubOptions) {
    this.log = log;
    this.refreshIntervalMs = refreshIntervalMs;
  }

  addDelta(workerId: number, delta: MetricsDelta): void {
    try {
      this.aggregator.addDelta(workerId, delta);
      this.touch();
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
    this.touch();
  }

  /** A routing table is published: the series of upstreams and endpoints it no longer has go (see MetricsAggregator.retainRouted). */
  retainRouted(routed: RoutedSeries): void {
    this.aggregator.retainRouted(routed);
    this.touch();
  }

  /** `metrics.histogramBucketsS` of the config in service. */
  setHistogramBuckets(boundsS: readonly number[]): void {
    this.aggregator.setHistogramBuckets(boundsS);
    this.touch();
  }

  setWorkerCount(count: number): void {
    this.aggregator.setWorkerCount(count);
    this.touch();
  }

  setExtra(key: string, value: unknown): void {
    this.aggregator.setExtra(key, value);
    this.touch();
  }

  /** Text appended to the Prometheus rendering (e.g. the TLS certificates' expiry gauge), called at each render. */
  setPrometheusExtra(render: () => string): void {
    this.prometheusExtra = render;
    this.touch();
  }

  /** Something a lazy extra shows changed: the next answer is rendered anew. */
  touch(): void {
    this.rendered.json = null;
    this.rendered.prometheus = null;
  }

  /** The merged report in `format`, for a worker's /metrics answer. */
  answer(format: MetricsFormat): string {
    const now = Date.now();
    const kept = this.rendered[format];
    if (kept !== null && now - kept.at < this.refreshIntervalMs) return kept.body;
    // The primary's own process figures: read again in the background at most every PROCESS_METRICS_INTERVAL_MS.
    this.processes.refresh();
    const report = this.aggregator.report();
    const body = format === 'json' ? JSON.stringify(report) : this.aggregator.prometheus(report) + this.processes.text + this.prometheusExtra();
    this.rendered[format] = { body, at: now };
    return body;
  }

  stop(): void {
    this.processes.stop();
  }
}
