import * as hdr from './hdr.js';
import type { Histogram, JsHistogram } from './hdr.js';
import type { MetricsDelta, PartDelta, SeriesDelta } from './delta.js';
import { addEncodedHistogram, HIGHEST_RECORDED_MICROS, histogramSettings, type Precision } from './histogram.js';
import { BUCKET_PRECISION, bucketEdgesMicros, cumulativeCounts, DEFAULT_BUCKETS_S } from './buckets.js';
import { toPrometheus, type BuildLabels, type HistogramFamilies, type HistogramPart } from './prometheus.js';
import { counterPath } from './counters.js';
import { REPORT_FIELDS, type LatencySummaryMs, type MetricsReport, type SeriesReport } from './report.js';
import { retainKeys, type RoutedSeries } from './routed-series.js';

export type { MetricsReport, SeriesReport, LatencySummaryMs } from './report.js';

/** One labelled histogram of a series (an endpoint's status class, an upstream's answer times), summed. */
class PartTotals {
  private readonly histogram = hdr.build(histogramSettings(BUCKET_PRECISION, false)) as JsHistogram;
  private count = 0;
  private sumMicros = 0;
  /** The last rendering, until a delta changes the part or the bounds change. */
  private rendered: HistogramPart | null = null;
  private renderedEdges: readonly number[] | null = null;

  add(part: PartDelta): void {
    if (!(part.count > 0)) return;
    this.rendered = null;
    this.count += part.count;
    this.sumMicros += part.sumMicros;
    addEncodedHistogram(this.histogram, part.histogram);
  }

  report(edges: readonly number[]): HistogramPart {
    if (this.rendered !== null && this.renderedEdges === edges) return this.rendered;
    this.renderedEdges = edges;
    return (this.rendered = { count: this.count, sumSeconds: this.sumMicros / 1e6, cumulative: cumulativeCounts(this.histogram, edges) });
  }
}

/** One series (overall, an upstream or an endpoint) summed over every delta of every worker. */
class SeriesTotals {
  private readonly histogram: Histogram;
  readonly parts = new Map<string, PartTotals>();
  private readonly byStatus = new Map<string, number>();
  private requests = 0;
  private latencySumMicros = 0;
  private latencyMaxMicros = 0;
  /** The last report, until a delta changes the series (most series of a large table are quiet most of the time). */
  private rendered: SeriesReport | null = null;

  constructor(precision: Precision) {
    this.histogram = hdr.build(histogramSettings(precision, false));
  }

  add(delta: SeriesDelta): void {
    if (!(delta.requests > 0)) return;
    this.rendered = null;
    this.requests += delta.requests;
    for (const [status, count] of Object.entries(delta.byStatus)) {
      this.byStatus.set(status, (this.byStatus.get(status) ?? 0) + count);
    }
    this.latencySumMicros += delta.latencySumMicros;
    if (delta.latencyMaxMicros > this.latencyMaxMicros) this.latencyMaxMicros = delta.latencyMaxMicros;
    if (delta.histogram !== '') addEncodedHistogram(this.histogram, delta.histogram);
    if (delta.parts === undefined) return;
    for (const [name, part] of Object.entries(delta.parts)) {
      let totals = this.parts.get(name);
      if (totals === undefined) this.parts.set(name, (totals = new PartTotals()));
      totals.add(part);
      // No whole histogram: the whole is the sum of the parts (an endpoint's status classes).
      if (delta.histogram === '' && part.count > 0) addEncodedHistogram(this.histogram, part.histogram);
    }
  }

  report(): SeriesReport {
    return (this.rendered ??= { requests: this.requests, byStatus: this.statusCounts(), latencyMs: this.latency() });
  }

  statusCounts(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const status of [...this.byStatus.keys()].sort()) out[status] = this.byStatus.get(status)!;
    return out;
  }

  latency(): LatencySummaryMs {
    const count = this.histogram.totalCount;
    if (count === 0) return { p50: 0, p90: 0, p99: 0, p999: 0, max: 0, mean: 0, count: 0, sum: 0 };
    // HDR reports the top of a value's bucket; the exact max caps it so no percentile exceeds max. The
    // top bucket holds every latency past the histograms' range too: its top is the exact max.
    const max = this.latencyMaxMicros;
    const at = (percentile: number) => {
      const value = this.histogram.getValueAtPercentile(percentile);
      return millis(value >= HIGHEST_RECORDED_MICROS ? max : Math.min(value, max));
    };
    return {
      p50: at(50),
      p90: at(90),
      p99: at(99),
      p999: at(99.9),
      max: millis(max),
      mean: millis(this.latencySumMicros / count),
      count,
      sum: millis(this.latencySumMicros),
    };
  }
}

function millis(micros: number): number {
  return Math.round(micros) / 1000;
}

/** Primary side: merges every worker's deltas into the /metrics report. */
export class MetricsAggregator {
  private readonly startedAt: number;
  private readonly overall = new SeriesTotals(3);
  private readonly upstreams = new Map<string, SeriesTotals>();
  private readonly endpoints = new Map<string, SeriesTotals>();
  /** The upstreams and endpoints of the table published last (retainRouted); null: none yet, all kept. */
  private routed: RoutedSeries | null = null;
  private readonly inFlightByWorker = new Map<number, number>();
  /** Worker ids are never reused, so a late delta from a gone worker must not bring its gauge back. */
  private readonly goneWorkers = new Set<number>();
  private readonly extras = new Map<string, unknown>();
  /** Summed event counters by dotted name. */
  private readonly counters = new Map<string, number>();
  private workerCount = 0;
  /** Open WebSocket connections per live worker (its websocket.opened minus websocket.closed counts). */
  private readonly webSocketsByWorker = new Map<number, number>();
  private bucketEdges: readonly number[] = bucketEdgesMicros(DEFAULT_BUCKETS_S);
  private build: BuildLabels | undefined;

  constructor(private readonly now: () => number = Date.now) {
    this.startedAt = now();
  }

  /** Throws on something that is not a MetricsDelta (a worker bug), before counting any of it. */
  addDelta(workerId: number, delta: MetricsDelta): void {
    if (delta?.version !== 1 || typeof delta.overall !== 'object' || delta.overall === null) {
      throw new TypeError(`worker ${workerId} sent something that is not a MetricsDelta`);
    }
    this.overall.add(delta.overall);
    addAll(this.upstreams, delta.upstreams, this.routed?.upstreams);
    addAll(this.endpoints, delta.endpoints, this.routed?.endpoints);
    if (delta.counters !== undefined) {
      for (const [name, count] of Object.entries(delta.counters)) {
        if (Number.isFinite(count)) this.counters.set(name, (this.counters.get(name) ?? 0) + count);
      }
      const opened = delta.counters['websocket.opened'] ?? 0;
      const closed = delta.counters['websocket.closed'] ?? 0;
      if ((opened !== 0 || closed !== 0) && !this.goneWorkers.has(workerId)) {
        this.webSocketsByWorker.set(workerId, (this.webSocketsByWorker.get(workerId) ?? 0) + opened - closed);
      }
    }
    if (!this.goneWorkers.has(workerId)) this.inFlightByWorker.set(workerId, delta.inFlight);
  }

  /** Its counted requests stay; its in-flight gauge goes. */
  workerGone(workerId: number): void {
    this.goneWorkers.add(workerId);
    this.inFlightByWorker.delete(workerId);
    // Its WebSocket connections died with it.
    this.webSocketsByWorker.delete(workerId);
  }

  /**
   * A new routing table is published: the series of upstreams and endpoints it no longer has go, and a
   * delta that comes later for one of them (a request a worker finished on the table before) counts in
   * the overall series only. A series it still has keeps its counts; one added back starts from 0.
   */
  retainRouted(routed: RoutedSeries): void {
    this.routed = routed;
    retainKeys(this.upstreams, routed.upstreams);
    retainKeys(this.endpoints, routed.endpoints);
  }

  /** gateway_build_info's labels (not shown until set). */
  setBuildLabels(build: BuildLabels): void {
    this.build = build;
  }

  /** The Prometheus histogram bounds, seconds ascending (checked by the config's rules). */
  setHistogramBuckets(boundsS: readonly number[]): void {
    const edges = bucketEdgesMicros(boundsS);
    if (edges.join() !== this.bucketEdges.join()) this.bucketEdges = edges;
  }

  /** The histograms of the exposition: per endpoint and status class, per upstream. */
  histograms(): HistogramFamilies {
    const edges = this.bucketEdges;
    const requests: HistogramFamilies['requests'] = [];
    for (const key of [...this.endpoints.keys()].sort()) {
      const space = key.indexOf(' ');
      const method = key.slice(0, space);
      const route = key.slice(space + 1);
      const parts = this.endpoints.get(key)!.parts;
      for (const name of [...parts.keys()].sort()) {
        requests.push({ labels: [['method', method], ['route', route], ['status_class', name]], part: parts.get(name)!.report(edges) });
      }
    }
    const upstreams: HistogramFamilies['upstreams'] = [];
    for (const key of [...this.upstreams.keys()].sort()) {
      const part = this.upstreams.get(key)!.parts.get('upstream');
      if (part !== undefined) upstreams.push({ labels: [['upstream', key]], part: part.report(edges) });
    }
    return { edges, requests, upstreams };
  }

  setWorkerCount(n: number): void {
    this.workerCount = n;
  }

  /** Extra top-level report fields (e.g. lastReload); a function is called at each report; undefined removes one. */
  setExtra(key: string, value: unknown): void {
    if (REPORT_FIELDS.has(key)) throw new Error(`metrics extra "${key}" would replace a built-in field`);
    if (value === undefined) this.extras.delete(key);
    else this.extras.set(key, value);
  }

  report(): MetricsReport {
    let inFlight = 0;
    for (const n of this.inFlightByWorker.values()) inFlight += n;
    const overall = this.overall.report();
    const report: MetricsReport = {
      uptimeSeconds: Math.round(this.now() - this.startedAt) / 1000,
      workers: this.workerCount,
      requests: { total: overall.requests, byStatus: overall.byStatus, inFlight },
      latencyMs: overall.latencyMs,
      upstreams: reportAll(this.upstreams),
      endpoints: reportAll(this.endpoints),
    };
    for (const [key, value] of this.extras) report[key] = typeof value === 'function' ? (value as () => unknown)() : value;
    for (const name of [...this.counters.keys()].sort()) nestCounter(report, name, this.counters.get(name)!);
    if (this.counters.has('websocket.opened')) {
      let open = 0;
      for (const n of this.webSocketsByWorker.values()) open += n;
      (report.websocket as Record<string, unknown>).connections = open;
    }
    return report;
  }

  /** Pass the report() just rendered to skip computing it twice. */
  prometheus(report: MetricsReport = this.report()): string {
    return toPrometheus(report, this.histograms(), this.build);
  }
}

/**
 * "retries.afterConnectFailure" = 3 becomes report.retries.afterConnectFailure = 3; never over a built-in field.
 * A component is a configured id at times (`middleware.<id>.admitted`), so every level is an own
 * property of a null-prototype object: an id such as `__proto__` or `constructor` is a key like any other.
 */
function nestCounter(report: MetricsReport, name: string, count: number): void {
  const path = counterPath(name);
  if (REPORT_FIELDS.has(path[0]!)) return;
  let node = report as Record<string, unknown>;
  for (let i = 0; i < path.length - 1; i++) {
    const key = path[i]!;
    const next = Object.hasOwn(node, key) ? node[key] : undefined;
    if (typeof next === 'object' && next !== null) node = next as Record<string, unknown>;
    else node = ownValue(node, key, Object.create(null) as Record<string, unknown>);
  }
  ownValue(node, path[path.length - 1]!, count);
}

/** Sets node[key] as an own data property (plain assignment of `__proto__` would replace the prototype instead). */
function ownValue<T>(node: Record<string, unknown>, key: string, value: T): T {
  Object.defineProperty(node, key, { value, writable: true, enumerable: true, configurable: true });
  return value;
}

function addAll(totals: Map<string, SeriesTotals>, deltas: Record<string, SeriesDelta>, routed: ReadonlySet<string> | undefined): void {
  for (const [key, delta] of Object.entries(deltas)) {
    let series = totals.get(key);
    if (series === undefined) {
      if (routed !== undefined && !routed.has(key)) continue;
      series = new SeriesTotals(2);
      totals.set(key, series);
    }
    series.add(delta);
  }
}

function reportAll(totals: Map<string, SeriesTotals>): Record<string, SeriesReport> {
  const out: Record<string, SeriesReport> = {};
  for (const key of [...totals.keys()].sort()) out[key] = totals.get(key)!.report();
  return out;
}
