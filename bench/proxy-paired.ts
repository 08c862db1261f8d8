// Paired rounds of bench:proxy: what a feature costs, measured with the gateway without it running at
// the same moment.
//
// Why: one after the other, two 5-second runs of the same build on this shared 2-core machine differ by
// 10-20% in CPU per request (the host's other tenants come and go), which is more than the 3-5% the
// feature targets allow. Run side by side, each under its own load generator, both contenders meet the
// same host at the same time, and what they differ by is the feature. An A/A check (the same config on
// both sides, 5 rounds, 2026-11-26) gave per-round CPU ratios of 0.89-1.01, median 0.98; the same
// contenders measured one after the other moved by up to 20%.
//
// Each side gets its own wrk (-t1, the bench's connection count) started together; CPU per request is
// each contender's on-CPU time (its process group, from /proc) over the requests its wrk completed.
// Under this load the two compete for the same cores, so the side that costs more per request also
// completes fewer: the req/s ratio says the same as the CPU ratio, less steadily.

import { median } from './median.js';

export interface PairSpec {
  /** The contender without the feature. */
  base: string;
  /** The same gateway with it. */
  variant: string;
  /** What the variant adds, as the target names it. */
  what: string;
  /** The most it may cost, as a share (0.05: 5%). */
  limit: number;
}

export const PAIRS: readonly PairSpec[] = [
  { base: 'gateway-off', variant: 'gateway', what: 'metrics + access log + request IDs', limit: 0.05 },
  { base: 'gateway', variant: 'gateway-trace-1', what: 'span export at 1% sampling', limit: 0.03 },
];

/**
 * BENCH_PAIRS="base:variant,...": other pairs instead of PAIRS, with no target (an A/A check of the
 * method, "gateway:gateway-off" to see the sign flip, a middleware's cost).
 */
export function pairsFrom(value: string | undefined): readonly PairSpec[] {
  if (value === undefined || value.trim() === '') return PAIRS;
  return value.split(',').map((item) => {
    const [base, variant] = item.trim().split(':');
    if (!base || !variant) throw new Error(`BENCH_PAIRS: "${item}" is not base:variant`);
    return { base, variant, what: `${variant} beside ${base}`, limit: Number.NaN };
  });
}

export interface SideResult {
  requests: number;
  rps: number;
  cpuUsPerRequest: number;
}

export interface PairRound {
  base: SideResult;
  variant: SideResult;
}

export interface PairSummary {
  spec: PairSpec;
  rounds: PairRound[];
  /** Per round: variant CPU per request / base CPU per request. */
  cpuRatios: number[];
  /** Per round: variant req/s / base req/s. */
  rpsRatios: number[];
  /** Median of cpuRatios, less 1: the CPU the feature adds per request. */
  cpuAdded: number;
  /** 1 less the median of rpsRatios: the requests the feature costs. */
  rpsLost: number;
}

export function summarizePair(spec: PairSpec, rounds: PairRound[]): PairSummary {
  const cpuRatios = rounds.map((r) => r.variant.cpuUsPerRequest / r.base.cpuUsPerRequest);
  const rpsRatios = rounds.map((r) => r.variant.rps / r.base.rps);
  return { spec, rounds, cpuRatios, rpsRatios, cpuAdded: median(cpuRatios) - 1, rpsLost: 1 - median(rpsRatios) };
}

const pct = (share: number): string => `${(share * 100).toFixed(1)}%`;
/** A change with its sign: +4.1%, -2.7%. */
const signed = (share: number): string => (share < 0 ? pct(share) : `+${pct(share)}`);

/** The paired section of the report: a table, then one target line per pair. */
export function formatPairs(summaries: readonly PairSummary[], connections: number, durationS: number): string[] {
  if (summaries.length === 0) return [];
  const out: string[] = [];
  out.push('');
  out.push(
    `Paired rounds (two contenders at once, each under its own wrk -t1 -c${connections} for ${durationS} s; ` +
      'see bench/proxy-paired.ts): CPU per request of the one with the feature over the one without, round by round.',
  );
  out.push('');
  out.push('| feature | base → with it, CPU µs/req (median) | CPU ratio per round | CPU added | req/s lost |');
  out.push('|---|---|---|---:|---:|');
  for (const s of summaries) {
    const base = median(s.rounds.map((r) => r.base.cpuUsPerRequest));
    const variant = median(s.rounds.map((r) => r.variant.cpuUsPerRequest));
    out.push(
      `| ${s.spec.what} (${s.spec.base} → ${s.spec.variant}) | ${base.toFixed(1)} → ${variant.toFixed(1)} | ${s.cpuRatios.map((r) => r.toFixed(3)).join(', ')} | ${pct(s.cpuAdded)} | ${pct(s.rpsLost)} |`,
    );
  }
  return out;
}

/** Target lines: the feature is within its limit when the CPU it adds and the req/s it costs both are. */
export function pairTargetLines(summaries: readonly PairSummary[]): string[] {
  return summaries.filter((s) => !Number.isNaN(s.spec.limit)).map((s) => {
    const worst = Math.max(s.cpuAdded, s.rpsLost);
    const limit = s.spec.limit;
    const measured = `CPU ${signed(s.cpuAdded)}, req/s ${signed(-s.rpsLost)} (median of ${s.rounds.length})`;
    return `- ${s.spec.what} costs <= ${limit * 100}% (paired, wrk): ${measured} — ${worst <= limit ? 'met' : `MISSED by ${(((worst - limit) / limit) * 100).toFixed(0)}%`}`;
  });
}
