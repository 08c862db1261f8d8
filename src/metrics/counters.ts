/**
 * Named event counters of one worker (retries, and later middleware decisions), shipped with each
 * metrics delta and summed in the primary. A name is a dotted path ("retries.afterConnectFailure")
 * that the report nests into objects ({ retries: { afterConnectFailure: 3 } }).
 */
export class Counters {
  private counts = new Map<string, number>();

  add(name: string, n = 1): void {
    this.counts.set(name, (this.counts.get(name) ?? 0) + n);
  }

  get isEmpty(): boolean {
    return this.counts.size === 0;
  }

  /** What was counted since the last take, or null when nothing was. */
  take(): Record<string, number> | null {
    if (this.counts.size === 0) return null;
    const out = Object.fromEntries(this.counts);
    this.counts = new Map();
    return out;
  }
}
