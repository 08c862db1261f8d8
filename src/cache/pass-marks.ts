/**
 * Keys whose last answer could not be stored: a miss on one of them goes upstream at once, without
 * leading or following a flight (what Varnish calls hit-for-miss). Coalescing is for answers that
 * will be stored; for the others it made each concurrent request wait for the one before it to get
 * its answer head, and took a lock in the shared store (a write transaction to take it and one to
 * give it back: 38 µs per miss, node loop of 20,000 pairs) for every request of a route that is
 * never cached. The answer is still judged: a storable one is stored and clears the mark.
 *
 * Per worker, bounded: past MAX_KEYS every mark goes (a forgotten mark costs one coalesced miss).
 */
export const PASS_MARK_MS = 10_000;
const MAX_KEYS = 10_000;

export class PassMarks {
  private readonly until = new Map<string, number>();

  constructor(private readonly ttlMs = PASS_MARK_MS) {}

  mark(key: string, now: number): void {
    if (this.until.size >= MAX_KEYS && !this.until.has(key)) this.until.clear();
    this.until.set(key, now + this.ttlMs);
  }

  /** Whether `key` is marked now (an expired mark goes). */
  has(key: string, now: number): boolean {
    const until = this.until.get(key);
    if (until === undefined) return false;
    if (now < until) return true;
    this.until.delete(key);
    return false;
  }

  unmark(key: string): void {
    this.until.delete(key);
  }
}
