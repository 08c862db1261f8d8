/**
 * A sweep interval that runs only while its owner has something to sweep: the lease client and bank
 * (src/stores/) run it while they know a key, an upstream pool (src/upstream/pool.ts) while it holds
 * a connection or a queued call, so an idle process is not woken by them. Unref'd: it never keeps a
 * process alive.
 */
export class SweepTimer {
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  /** `everyMs` 0: never by itself (the owner's sweep() is called by hand, as tests do). */
  constructor(
    private readonly everyMs: number,
    private readonly sweep: () => void,
  ) {}

  get running(): boolean {
    return this.timer !== null;
  }

  /** There is something to sweep: runs every everyMs from now on, unless already running or closed. */
  start(): void {
    if (this.timer === null && this.everyMs > 0 && !this.closed) this.timer = setInterval(this.sweep, this.everyMs).unref();
  }

  /** Nothing left to sweep. */
  stop(): void {
    if (this.timer === null) return;
    clearInterval(this.timer);
    this.timer = null;
  }

  /** For good: start() does nothing afterwards. */
  close(): void {
    this.closed = true;
    this.stop();
  }
}
