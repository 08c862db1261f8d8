import type { RouteEntry } from '../routing/types.js';

/**
 * A string that is equal for two entry lists exactly when they route the same: entry order and the
 * order inside each list do not count.
 */
export function entriesFingerprint(entries: readonly RouteEntry[]): string {
  const lines = entries.map((entry) =>
    JSON.stringify([
      entry.upstream,
      entry.method,
      entry.template,
      [...entry.consumes].sort(),
      [...entry.produces].sort(),
      [...entry.disabledMiddleware].sort(),
      [...entry.disabledListeners].sort(),
    ]),
  );
  return lines.sort().join('\n');
}

export function entriesEqual(a: readonly RouteEntry[], b: readonly RouteEntry[]): boolean {
  return a.length === b.length && entriesFingerprint(a) === entriesFingerprint(b);
}

/** Whether a re-discovered doc changed anything /spec shows (entries can stay equal while schemas change). */
export function docsEqual(a: object | null, b: object | null): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}
