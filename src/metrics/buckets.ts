import * as hdr from './hdr.js';
import type { JsHistogram } from './hdr.js';
import { histogramSettings, MAX_LATENCY_MICROS, type Precision } from './histogram.js';

/**
 * Default `metrics.histogramBucketsS`: sub-millisecond (a cached answer, a local upstream) to tens of
 * seconds (a slow upstream near the default timeouts).
 */
export const DEFAULT_BUCKETS_S: readonly number[] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** The precision of the per-route and per-upstream histograms the Prometheus buckets are read from. */
export const BUCKET_PRECISION: Precision = 2;

/** The largest bound accepted, in seconds (a longer latency is counted by `+Inf` only; see HIGHEST_RECORDED_MICROS). */
export const MAX_BUCKET_S = MAX_LATENCY_MICROS / 1e6;

let reference: JsHistogram | undefined;

function referenceHistogram(): JsHistogram {
  return (reference ??= hdr.build(histogramSettings(BUCKET_PRECISION, false)) as JsHistogram);
}

/**
 * The `le` bounds the exposition uses, in whole microseconds: each configured bound (seconds) moved
 * up to the top of the HDR bucket that holds it. Latencies are recorded as whole microseconds
 * (rounded up), and every value of an HDR bucket at or below its top is at or below the bound, so
 * counting whole HDR buckets up to the bound is exact: `_bucket{le}` is the number of requests that
 * took at most `le` seconds. The move is under 0.8 % (two significant digits: 128 sub-buckets per
 * power of two); below 256 µs HDR buckets are single microseconds and nothing moves.
 */
export function bucketEdgesMicros(boundsS: readonly number[]): number[] {
  const histogram = referenceHistogram();
  return boundsS.map((s) => histogram.highestEquivalentValue(Math.max(1, Math.ceil(Math.round(s * 1e9) / 1e3))));
}

/** Problems of a `metrics.histogramBucketsS` list (empty when it is usable), each a sentence. */
export function bucketProblems(boundsS: readonly number[]): string[] {
  const problems: string[] = [];
  if (boundsS.length === 0) return ['must list at least one bound'];
  for (let i = 0; i < boundsS.length; i++) {
    const s = boundsS[i]!;
    if (!(s > 0) || !Number.isFinite(s)) problems.push(`bound ${i} (${s}) must be a positive number of seconds`);
    else if (s > MAX_BUCKET_S) problems.push(`bound ${i} (${s}) is above ${MAX_BUCKET_S} s, the longest bound the histograms take`);
    else if (i > 0 && !(s > boundsS[i - 1]!)) problems.push(`bound ${i} (${s}) must be greater than bound ${i - 1} (${boundsS[i - 1]}): bounds are ascending`);
  }
  if (problems.length > 0) return problems;
  const edges = bucketEdgesMicros(boundsS);
  for (let i = 1; i < edges.length; i++) {
    if (edges[i] === edges[i - 1]) {
      problems.push(`bounds ${boundsS[i - 1]} and ${boundsS[i]} fall in one histogram bucket (${edges[i]} µs): keep bounds at least 1 % apart`);
    }
  }
  return problems;
}

/**
 * Cumulative counts of `histogram` at each edge (ascending, from bucketEdgesMicros), then the total
 * (the `+Inf` bucket). The histogram must have BUCKET_PRECISION's settings.
 */
export function cumulativeCounts(histogram: JsHistogram, edges: readonly number[]): number[] {
  const out = new Array<number>(edges.length + 1);
  let index = 0;
  let running = 0;
  for (let b = 0; b < edges.length; b++) {
    const last = histogram.countsArrayIndex(edges[b]!);
    for (; index <= last; index++) running += histogram.getCountAtIndex(index);
    out[b] = running;
  }
  out[edges.length] = histogram.totalCount;
  return out;
}

/** A bound in microseconds as the `le` label's seconds. */
export function leLabel(micros: number): string {
  return String(micros / 1e6);
}
