/*
 * The breaker of a remote store: after `failures` consecutive failed commands (timeouts, lost or
 * missing connection) it opens and the store fails fast, without touching the network, for `resetMs`;
 * then one command goes through as a probe: success closes it, failure opens it for another resetMs.
 * A probe always reports back (commands time out), so it cannot get stuck half-open.
 */

export type StoreBreakerState = 'closed' | 'open' | 'half-open';

export class StoreBreaker {
  private consecutive = 0;
  private openedAt = 0;
  private current: StoreBreakerState = 'closed';
  /** Times it opened (from closed or from a failed probe). */
  opens = 0;

  constructor(
    private readonly failures: number,
    private readonly resetMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  get state(): StoreBreakerState {
    if (this.current === 'open' && this.now() - this.openedAt >= this.resetMs) return 'half-open';
    return this.current;
  }

  /** Whether a command may go now. True for an open breaker past resetMs: that command is the probe. */
  permits(): boolean {
    if (this.current === 'closed') return true;
    if (this.current === 'half-open') return false; // the probe is out
    if (this.now() - this.openedAt < this.resetMs) return false;
    this.current = 'half-open';
    return true;
  }

  /** Open for resetMs already: the next command would be its probe. */
  probeDue(): boolean {
    return this.current === 'open' && this.now() - this.openedAt >= this.resetMs;
  }

  succeeded(): void {
    this.consecutive = 0;
    this.current = 'closed';
  }

  /** Returns true when this failure opened the breaker. */
  failed(): boolean {
    this.consecutive++;
    if (this.current === 'half-open' || (this.current === 'closed' && this.consecutive >= this.failures)) {
      this.current = 'open';
      this.openedAt = this.now();
      this.opens++;
      return true;
    }
    return false;
  }
}
