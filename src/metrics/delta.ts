import type { ProcessSnapshot } from './process-metrics.js';

/** What one worker recorded since its previous delta: plain data, safe for JSON and structured clone. */
export interface MetricsDelta {
  version: 1;
  /** Gauge: requests in flight in that worker now. */
  inFlight: number;
  overall: SeriesDelta;
  /** Keyed by the upstream's serviceLocation; only series with requests in this delta. */
  upstreams: Record<string, SeriesDelta>;
  /** Keyed by route key, e.g. "GET /users/{id}"; only series with requests in this delta. */
  endpoints: Record<string, SeriesDelta>;
  /** Event counts since the previous delta, by dotted name (see src/metrics/counters.ts); absent when none. */
  counters?: Record<string, number>;
  /** The worker's process_* and nodejs_* metrics (prom-client's JSON), about once a second; absent otherwise. */
  process?: ProcessSnapshot;
  /** The uWebSockets.js build the worker serves with, "<package>@<version>"; sent with `process`. */
  uws?: string;
}

export interface SeriesDelta {
  requests: number;
  /** Status code (as a string) to count; "0" gathers anything outside 100..599. */
  byStatus: Record<string, number>;
  /** Exact sum of the recorded latencies, in microseconds. */
  latencySumMicros: number;
  /** Exact largest recorded latency, in microseconds. */
  latencyMaxMicros: number;
  /**
   * HDR histogram of latencies in microseconds (see histogram.ts encodeHistogram); "" when empty, or
   * when `parts` is present and the whole is the sum of its parts (an endpoint's status classes).
   */
  histogram: string;
  /**
   * Histograms the Prometheus exposition shows under their own labels: an endpoint's latencies by
   * status class ("2xx", ..., "other"); an upstream's own answer times ("upstream"). Absent when none.
   */
  parts?: Record<string, PartDelta>;
}

/** One labelled histogram of a series (precision 2, microseconds). */
export interface PartDelta {
  count: number;
  sumMicros: number;
  histogram: string;
}
