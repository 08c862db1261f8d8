/** Latency summary in milliseconds (3 decimals, i.e. microsecond resolution); all 0 when count is 0. */
export interface LatencySummaryMs {
  p50: number;
  p90: number;
  p99: number;
  p999: number;
  max: number;
  mean: number;
  count: number;
  /** Sum of all latencies (for Prometheus' summary _sum). */
  sum: number;
}

export interface SeriesReport {
  requests: number;
  byStatus: Record<string, number>;
  latencyMs: LatencySummaryMs;
}

/** The /metrics JSON body; extras set with MetricsAggregator.setExtra() sit beside these fields. */
export interface MetricsReport {
  uptimeSeconds: number;
  workers: number;
  requests: { total: number; byStatus: Record<string, number>; inFlight: number };
  latencyMs: LatencySummaryMs;
  /** Keyed by serviceLocation. */
  upstreams: Record<string, SeriesReport>;
  /** Keyed by route key, e.g. "GET /users/{id}". */
  endpoints: Record<string, SeriesReport>;
  [extra: string]: unknown;
}

export const REPORT_FIELDS: ReadonlySet<string> = new Set([
  'uptimeSeconds',
  'workers',
  'requests',
  'latencyMs',
  'upstreams',
  'endpoints',
]);
