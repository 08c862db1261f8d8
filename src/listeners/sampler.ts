/**
 * Decides which requests are sampled: a share `rate` (0..1) of the calls, from xorshift32 (a few
 * integer operations per call, no allocation; statistical quality is plenty for picking requests, and
 * nothing here needs to be unpredictable). Seeded from Math.random unless a seed is given (tests).
 */
export class Sampler {
  private state: number;
  /** Calls whose next 32-bit number is below this are taken: rate * 2^32. */
  private readonly threshold: number;

  constructor(
    readonly rate: number,
    seed = Math.floor(Math.random() * 0xffffffff),
  ) {
    this.threshold = Math.round(Math.min(1, Math.max(0, rate)) * 0x100000000);
    // xorshift has one fixed point, 0.
    this.state = seed >>> 0 || 0x9e3779b9;
  }

  take(): boolean {
    const threshold = this.threshold;
    if (threshold === 0) return false;
    if (threshold === 0x100000000) return true;
    let x = this.state;
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    this.state = x;
    return x >>> 0 < threshold;
  }
}
