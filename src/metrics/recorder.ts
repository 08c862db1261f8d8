import * as hdr from './hdr.js';
import type { Histogram } from './hdr.js';
import type { MetricsDelta, PartDelta, SeriesDelta } from './delta.js';
import { encodeHistogram, HIGHEST_RECORDED_MICROS, histogramSettings, roundLatency, webAssemblyReady, type Precision } from './histogram.js';
import { retainKeys, type RoutedSeries } from './routed-series.js';

export type { MetricsDelta, SeriesDelta } from './delta.js';

const STATUS_SLOTS = 600;

/** Status classes by hundreds digit; "other" for a status outside 100..599 (0: no answer recorded). */
export const STATUS_CLASSES = ['other', '1xx', '2xx', '3xx', '4xx', '5xx'] as const;

export function statusClassIndex(status: number): number {
  const hundreds = (status / 100) | 0;
  return hundreds >= 1 && hundreds <= 5 ? hundreds : 0;
}

/** One labelled histogram of a series since the last delta (see PartDelta). */
class PartRecorder {
  private readonly histogram: Histogram;
  private count = 0;
  private sumMicros = 0;

  constructor(readonly name: string, useWebAssembly: boolean) {
    this.histogram = hdr.build(histogramSettings(2, useWebAssembly));
  }

  /** `micros`: whole microseconds (roundLatency), kept exact in the sum; the histogram clamps. */
  record(micros: number): void {
    this.count++;
    this.sumMicros += micros;
    this.histogram.recordValue(micros < HIGHEST_RECORDED_MICROS ? micros : HIGHEST_RECORDED_MICROS);
  }

  take(): PartDelta | null {
    if (this.count === 0) return null;
    const part = { count: this.count, sumMicros: this.sumMicros, histogram: encodeHistogram(this.histogram) };
    this.histogram.reset();
    this.count = 0;
    this.sumMicros = 0;
    return part;
  }
}

/**
 * Counts and latencies of one series (overall, one upstream or one endpoint) since the last delta.
 * An endpoint keeps its latencies per status class only (its whole histogram is their sum, made in
 * the primary); an upstream keeps a second histogram of its own answer times.
 */
class SeriesRecorder {
  private readonly histogram: Histogram | null;
  private readonly parts: Array<PartRecorder | undefined> = [];
  private readonly byStatus = new Uint32Array(STATUS_SLOTS);
  private requests = 0;
  private latencySumMicros = 0;
  private latencyMaxMicros = 0;

  constructor(
    precision: Precision,
    private readonly useWebAssembly: boolean,
    byClass = false,
  ) {
    this.histogram = byClass ? null : hdr.build(histogramSettings(precision, useWebAssembly));
  }

  get isEmpty(): boolean {
    return this.requests === 0;
  }

  /** `micros`: whole microseconds (roundLatency), kept exact in the sum and max; the histogram clamps. */
  record(statusSlot: number, micros: number): void {
    this.requests++;
    this.byStatus[statusSlot]!++;
    this.latencySumMicros += micros;
    if (micros > this.latencyMaxMicros) this.latencyMaxMicros = micros;
    if (this.histogram !== null) this.histogram.recordValue(micros < HIGHEST_RECORDED_MICROS ? micros : HIGHEST_RECORDED_MICROS);
    else this.part(statusClassIndex(statusSlot), STATUS_CLASSES[statusClassIndex(statusSlot)]!).record(micros);
  }

  /** An upstream call's time (request sent until its answer ended or the call failed), beside the request's latency. */
  recordUpstream(micros: number): void {
    this.part(0, 'upstream').record(micros);
  }

  private part(index: number, name: string): PartRecorder {
    return (this.parts[index] ??= new PartRecorder(name, this.useWebAssembly));
  }

  takeDelta(): SeriesDelta {
    const byStatus: Record<string, number> = {};
    if (this.requests > 0) {
      for (let status = 0; status < STATUS_SLOTS; status++) {
        const count = this.byStatus[status]!;
        if (count > 0) byStatus[status] = count;
      }
    }
    const delta: SeriesDelta = {
      requests: this.requests,
      byStatus,
      latencySumMicros: this.latencySumMicros,
      latencyMaxMicros: this.latencyMaxMicros,
      histogram: this.requests > 0 && this.histogram !== null ? encodeHistogram(this.histogram) : '',
    };
    let parts: Record<string, PartDelta> | undefined;
    for (const recorder of this.parts) {
      const part = recorder?.take();
      if (part) (parts ??= {})[recorder!.name] = part;
    }
    if (parts !== undefined) delta.parts = parts;
    if (this.requests > 0) {
      this.histogram?.reset();
      this.byStatus.fill(0);
      this.requests = 0;
      this.latencySumMicros = 0;
      this.latencyMaxMicros = 0;
    }
    return delta;
  }
}

export interface MetricsRecorderOptions {
  /** Record with hdr-histogram-js's WebAssembly build (default: when available; ~6x faster than JS). */
  useWebAssembly?: boolean;
}

/** Worker side: records each finished request; takeDelta() ships what changed to the primary. */
export class MetricsRecorder {
  private readonly useWebAssembly: boolean;
  private readonly overall: SeriesRecorder;
  private readonly upstreams = new Map<string, SeriesRecorder>();
  private readonly endpoints = new Map<string, SeriesRecorder>();
  /** Per route id: the endpoint's series (and the last upstream's), so routeFinished() builds no key. */
  private readonly routes: Array<RouteSeries | undefined> = [];
  /** The upstreams and endpoints of the table in service (retainRouted); null: none yet, all kept. */
  private routed: RoutedSeries | null = null;
  /**
   * Where a request finished on a table no longer in service records its upstream and endpoint (it
   * counts in the overall series only): never shipped, emptied at each delta. Made when first needed.
   */
  private unrouted: { upstream: SeriesRecorder; endpoint: SeriesRecorder } | null = null;
  private inFlight = 0;

  constructor(options: MetricsRecorderOptions = {}) {
    this.useWebAssembly = (options.useWebAssembly ?? true) && webAssemblyReady();
    this.overall = new SeriesRecorder(3, this.useWebAssembly);
  }

  /**
   * A new routing table is in service: the series of upstreams and endpoints it no longer has go (what
   * they recorded since the last delta too; the overall series has it), and requests that finish later
   * on the table before record nothing under them. A series it still has is kept as it is.
   */
  retainRouted(routed: RoutedSeries): void {
    this.routed = routed;
    retainKeys(this.upstreams, routed.upstreams);
    retainKeys(this.endpoints, routed.endpoints);
    // Its entries may hold a series just dropped; the next request of each route looks it up again.
    this.routes.length = 0;
  }

  requestStarted(): void {
    this.inFlight++;
  }

  /**
   * @param routeKey e.g. "GET /users/{id}"; null for built-in endpoints and unrouted requests.
   * @param upstream the serviceLocation the request went to; null when it went to none.
   * @param upstreamMicros the upstream call's time (sent until its answer ended or it failed; RequestContext.upstreamMs); negative when no call was made.
   */
  requestFinished(routeKey: string | null, upstream: string | null, status: number, latencyMicros: number, upstreamMicros = -1): void {
    if (this.inFlight > 0) this.inFlight--;
    const statusSlot = status >= 100 && status < STATUS_SLOTS ? status | 0 : 0;
    const micros = roundLatency(latencyMicros);
    this.overall.record(statusSlot, micros);
    if (upstream !== null) {
      const series = this.series(this.upstreams, upstream, false, this.routed?.upstreams);
      series.record(statusSlot, micros);
      if (upstreamMicros >= 0) series.recordUpstream(roundLatency(upstreamMicros));
    }
    if (routeKey !== null) this.series(this.endpoints, routeKey, true, this.routed?.endpoints).record(statusSlot, micros);
  }

  /**
   * requestFinished() for a request routed to an endpoint, without building its "METHOD template" key
   * on every call. Route ids are only stable within one routing table, so the entry remembered for an
   * id is used only while its method and template are the same (the template is the same string object
   * for as long as a table serves, which makes the check a pointer comparison).
   */
  routeFinished(routeId: number, method: string, template: string, upstream: string | null, status: number, latencyMicros: number, upstreamMicros = -1): void {
    let route = this.routes[routeId];
    if (route === undefined || route.template !== template || route.method !== method) {
      route = { method, template, series: this.series(this.endpoints, `${method} ${template}`, true, this.routed?.endpoints), upstream: null, upstreamSeries: null };
      if (routeId >= 0 && Number.isInteger(routeId)) this.routes[routeId] = route;
    }
    if (this.inFlight > 0) this.inFlight--;
    const statusSlot = status >= 100 && status < STATUS_SLOTS ? status | 0 : 0;
    const micros = roundLatency(latencyMicros);
    this.overall.record(statusSlot, micros);
    if (upstream !== null) {
      if (route.upstream !== upstream) {
        route.upstream = upstream;
        route.upstreamSeries = this.series(this.upstreams, upstream, false, this.routed?.upstreams);
      }
      route.upstreamSeries!.record(statusSlot, micros);
      if (upstreamMicros >= 0) route.upstreamSeries!.recordUpstream(roundLatency(upstreamMicros));
    }
    route.series.record(statusSlot, micros);
  }

  takeDelta(): MetricsDelta {
    if (this.unrouted !== null) {
      if (!this.unrouted.upstream.isEmpty) this.unrouted.upstream.takeDelta();
      if (!this.unrouted.endpoint.isEmpty) this.unrouted.endpoint.takeDelta();
    }
    return {
      version: 1,
      inFlight: this.inFlight,
      overall: this.overall.takeDelta(),
      upstreams: takeDeltas(this.upstreams),
      endpoints: takeDeltas(this.endpoints),
    };
  }

  /** `routed`: the keys the table in service has; a key it does not have gets the unrouted series, kept nowhere. */
  private series(map: Map<string, SeriesRecorder>, key: string, byClass: boolean, routed: ReadonlySet<string> | undefined): SeriesRecorder {
    let series = map.get(key);
    if (series === undefined) {
      if (routed !== undefined && !routed.has(key)) {
        this.unrouted ??= { upstream: new SeriesRecorder(2, this.useWebAssembly), endpoint: new SeriesRecorder(2, this.useWebAssembly, true) };
        return byClass ? this.unrouted.endpoint : this.unrouted.upstream;
      }
      series = new SeriesRecorder(2, this.useWebAssembly, byClass);
      map.set(key, series);
    }
    return series;
  }
}

interface RouteSeries {
  method: string;
  template: string;
  series: SeriesRecorder;
  /** The upstream this route last went to, and its series. */
  upstream: string | null;
  upstreamSeries: SeriesRecorder | null;
}

function takeDeltas(map: Map<string, SeriesRecorder>): Record<string, SeriesDelta> {
  const out: Record<string, SeriesDelta> = {};
  for (const [key, series] of map) {
    if (!series.isEmpty) out[key] = series.takeDelta();
  }
  return out;
}
