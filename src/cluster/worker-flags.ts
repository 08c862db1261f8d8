/**
 * The Node/V8 flags the workers start with: the primary's own, plus single-threaded scavenges.
 *
 * V8 collects the young generation with helper threads by default. The gateway runs one worker per
 * core, so there is no idle core for those helpers: each scavenge waits for threads that compete with
 * the other workers and whatever else runs on the host for the same cores. Measured on this
 * project's 2-core machine at 12,000 req/s paced (4 pairs of 10 s runs, `--trace-gc`): scavenge
 * pauses took 39-63 ms in all per 10 s with `--no-parallel-scavenge` against 76-108 ms without,
 * median pause 0.44-0.72 ms against 0.93-1.32 ms. CPU per request and the paced p99 did not move
 * beyond this machine's noise. An operator who starts the gateway with a scavenge setting of their
 * own (`node --parallel-scavenge ...`, `--single-threaded-gc`) keeps it.
 */
import { spawnSync } from 'node:child_process';

export const SCAVENGE_FLAG = '--no-parallel-scavenge';

/** True when the operator already chose how V8 collects garbage in threads. */
function choosesScavenging(arg: string): boolean {
  const flag = arg.replace(/_/g, '-');
  return flag.includes('parallel-scavenge') || flag.includes('single-threaded-gc');
}

/**
 * The workers' execArgv. `flagAccepted` tells whether this Node accepts the flag (a V8 that dropped
 * it would stop every worker at start with "bad option"); it is asked only when the flag is wanted.
 */
export function workerExecArgv(
  primaryExecArgv: readonly string[],
  flagAccepted: () => boolean,
): { execArgv: string[]; scavenging: 'single-threaded' | 'operator' | 'refused' } {
  if (primaryExecArgv.some(choosesScavenging)) return { execArgv: [...primaryExecArgv], scavenging: 'operator' };
  if (!flagAccepted()) return { execArgv: [...primaryExecArgv], scavenging: 'refused' };
  return { execArgv: [SCAVENGE_FLAG, ...primaryExecArgv], scavenging: 'single-threaded' };
}

/** Node majors whose V8 is known to take the flag (the probe ran on each): no probe at start. */
const KNOWN_MAJORS = new Set([20, 22, 24]);

/**
 * Whether this Node takes the flag. A known major answers at once; any other Node is started with the
 * flag once (a probe that cost 0.18 s of the primary's CPU at every start, a quarter of its own work
 * before the workers, when it ran on every Node).
 */
export function nodeAcceptsScavengeFlag(version = process.versions.node): boolean {
  if (KNOWN_MAJORS.has(Number(version.split('.')[0]))) return true;
  return probeScavengeFlag();
}

/** Starts this Node with the flag (about 40 ms of wall time). */
export function probeScavengeFlag(): boolean {
  const probe = spawnSync(process.execPath, [SCAVENGE_FLAG, '-e', ''], { stdio: 'ignore', timeout: 10_000 });
  return probe.status === 0;
}
