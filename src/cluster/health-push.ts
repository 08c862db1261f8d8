import type { HealthMessage } from './messages.js';

/**
 * Hands the rendered health report to the workers, only when it changed. A change of status goes out
 * at once; other changes go out at once too unless one went out less than `minIntervalMs` ago, in
 * which case the latest report follows at the end of that interval. Each worker acknowledging a new
 * table changes the report (its slot's table version): with N workers that is N changes per publish,
 * and without the interval N pushes to each of N workers.
 */
export class HealthPush {
  /** The newest report: what a worker that starts is given. */
  current: HealthMessage | null = null;
  private lastPushAt = Number.NEGATIVE_INFINITY;
  private lastStatus: number | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly broadcast: (message: HealthMessage) => void,
    private readonly minIntervalMs = 25,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /**
   * `immediately`: push a change at once even during the interval. For the report that goes with a table just
   * handed to the workers: each worker then gets the table and the report that counts its endpoints
   * back to back, so /healthcheck never lags what is routed (a deferred push could trail it by up to
   * minIntervalMs).
   */
  update(status: HealthMessage['status'], body: string, immediately = false): void {
    if (this.current && this.current.status === status && this.current.body === body) {
      // The same report may still be waiting for the interval (rendered by a change just before the table).
      if (immediately && this.timer) this.push();
      return;
    }
    this.current = { type: 'health', status, body };
    if (immediately || status !== this.lastStatus) return this.push();
    if (this.timer) return;
    const waitMs = this.lastPushAt + this.minIntervalMs - this.now();
    if (waitMs <= 0) return this.push();
    this.timer = setTimeout(() => {
      this.timer = null;
      this.push();
    }, waitMs);
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private push(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const message = this.current!;
    this.lastPushAt = this.now();
    this.lastStatus = message.status;
    this.broadcast(message);
  }
}
