/**
 * The warn lines of a response cache's failures (its store failing, or the cache failing to decide):
 * at most one per kind every 10 s, with how many were left out since the last, so a broken store does
 * not flood the log. Counters say how many; the line says why. Failure path only.
 */
import { LineThrottle } from '../log-throttle.js';

export type Warn = (message: string, fields?: Record<string, unknown>) => void;

export class FailureLog {
  private readonly throttle = new LineThrottle();

  constructor(
    private readonly warn: Warn,
    /** What failed, for the message: `responseCache "cache": the store failed`. */
    private readonly what: string,
    private readonly fields: Record<string, unknown>,
    private readonly now: () => number = () => performance.now(),
  ) {}

  report(err: unknown): void {
    const left = this.throttle.take(this.now());
    if (left === null) return;
    const reason = err instanceof Error ? err.message : String(err);
    const fields: Record<string, unknown> = { ...this.fields, reason };
    if (left > 0) fields.suppressed = left;
    this.warn(`${this.what}: ${reason}${left > 0 ? ` (${left} more since the last line)` : ''}`, fields);
  }
}
