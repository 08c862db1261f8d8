import type { TemplateProblem } from '../routing/types.js';
import type { UpstreamRecord, UpstreamRegistry } from './discovered-upstreams.js';

const problemKey = (p: TemplateProblem): string => `${p.upstream} ${p.method} ${p.template}`;

/** Template problems of the new table that the table before it did not have. */
export function newTemplateProblems(before: readonly TemplateProblem[], after: readonly TemplateProblem[]): TemplateProblem[] {
  const known = new Set(before.map(problemKey));
  return after.filter((problem) => !known.has(problemKey(problem)));
}

/**
 * The upstreams a reload fetched (new and changed ones) that failed discovery. An unchanged upstream
 * is not the reload's doing, whatever its state: it is not fetched, and the health report's
 * `upstreams` says how it is.
 */
export function fetchedFailures(after: UpstreamRegistry, unchanged: ReadonlyMap<UpstreamRecord, unknown>): UpstreamRecord[] {
  return after.records.filter((r) => r.state === 'failed' && !unchanged.has(r));
}

/**
 * What an applied reload could not use, as one line for the reload status; undefined when nothing.
 * The good endpoints serve regardless: one bad template never stops the others.
 */
export function describeReloadProblems(problems: readonly TemplateProblem[], failures: readonly UpstreamRecord[]): string | undefined {
  const parts: string[] = [];
  if (problems.length > 0) {
    const noun = problems.length === 1 ? 'endpoint' : 'endpoints';
    parts.push(`${problems.length} ${noun} left out (the others serve): ${problems.map((p) => p.message).join('; ')}`);
  }
  for (const failure of failures) {
    parts.push(`upstream ${failure.config.serviceLocation} could not be discovered: ${failure.lastError ?? 'unknown reason'}`);
  }
  return parts.length > 0 ? parts.join('; ') : undefined;
}
