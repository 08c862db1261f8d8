/**
 * At most one log line every `everyMs` for one kind of failure, so a broken dependency does not flood
 * the log: take() answers whether this one is logged, and how many were left out since the last line.
 * Failure paths only (the upstream TLS handshake lines, the response cache's failure lines).
 */
export class LineThrottle {
  private loggedAt = -Infinity;
  private left = 0;

  constructor(private readonly everyMs = 10_000) {}

  /** `now` in ms: the count left out since the last line (0 or more) when this one is logged, else null. */
  take(now: number): number | null {
    if (now - this.loggedAt < this.everyMs) {
      this.left++;
      return null;
    }
    this.loggedAt = now;
    const left = this.left;
    this.left = 0;
    return left;
  }
}
