import type { TemplateProblem } from '../routing/types.js';
import type { UpstreamRecord, UpstreamRegistry } from './discovered-upstreams.js';

const problemKey = (p: TemplateProblem): string => `${p.upstream} ${p.method} ${p.template}`;

/** Template problems of the new table that the table before it did not have. */
export function newTemplateProblems(before: readonly TemplateProblem[], after: readonly TemplateProblem[]): TemplateProblem[] {
  const known = new Set(before.map(problemKey));
  return after.filter((problem) => !known.has(problemKey(problem)));
}

/** Upstreams that failed discovery in `after` and had not already failed in `before`. */
export function newFailures(before: UpstreamRegistry, after: UpstreamRegistry): UpstreamRecord[] {
  const failedBefore = new Set(before.records.filter((r) => r.state === 'failed').map((r) => r.config.serviceLocation));
  return after.records.filter((r) => r.state === 'failed' && !failedBefore.has(r.config.serviceLocation));
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
