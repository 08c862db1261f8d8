// GCRA arithmetic (src/stores/gcra.ts) against a token bucket simulated as plainly as possible: BigInt
// token counts scaled by windowMs, so every refill and take is exact. Same admissions, remaining,
// reset and retry-after for random policies and arrival sequences near today's epoch milliseconds.
import fc from 'fast-check';
import t from 'tap';
import {
  type GcraState,
  MAX_LIMIT,
  gcraAvailable,
  gcraDecide,
  gcraPolicy,
  gcraRefund,
  gcraRescale,
} from '../../src/stores/gcra.js';

/** A bucket of `limit` tokens refilled at limit/windowMs per ms; tokens held ×windowMs as a BigInt. */
class ReferenceBucket {
  private readonly limit: bigint;
  private readonly window: bigint;
  private scaled: bigint;
  private last: bigint | null = null;

  constructor(limit: number, windowMs: number) {
    this.limit = BigInt(limit);
    this.window = BigInt(windowMs);
    this.scaled = this.limit * this.window;
  }

  private refill(now: number): void {
    const t = BigInt(now);
    if (this.last !== null) {
      const full = this.limit * this.window;
      this.scaled += (t - this.last) * this.limit;
      if (this.scaled > full) this.scaled = full;
    }
    this.last = t;
  }

  private ceilDiv(a: bigint, b: bigint): number {
    return a <= 0n ? 0 : Number((a + b - 1n) / b);
  }

  take(now: number, n: number) {
    this.refill(now);
    const need = BigInt(n) * this.window;
    const admitted = this.scaled >= need;
    if (admitted) this.scaled -= need;
    return {
      admitted,
      remaining: Number(this.scaled / this.window),
      resetMs: this.ceilDiv(this.limit * this.window - this.scaled, this.limit),
      retryAfterMs: admitted ? 0 : this.ceilDiv(need - this.scaled, this.limit),
    };
  }

  refund(now: number, n: number): void {
    this.refill(now);
    const full = this.limit * this.window;
    this.scaled += BigInt(n) * this.window;
    if (this.scaled > full) this.scaled = full;
  }
}

const EPOCH = 1_767_225_600_000; // 2026-01-01, where float TATs would already have lost precision

const policyArb = fc.record({
  limit: fc.oneof(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 5000 })),
  windowMs: fc.oneof(fc.integer({ min: 1, max: 100 }), fc.integer({ min: 1, max: 120_000 }), fc.constantFrom(1000, 60_000, 3_600_000)),
});

t.test('decisions equal an exact token bucket for random policies and arrivals', async (t) => {
  const seen = { admitted: 0, denied: 0 };
  fc.assert(
    fc.property(
      policyArb,
      fc.integer({ min: 0, max: 1_000_000 }),
      fc.array(fc.record({ gap: fc.nat(), n: fc.nat(), refund: fc.nat({ max: 9 }) }), { minLength: 1, maxLength: 120, size: 'max' }),
      ({ limit, windowMs }, start, events) => {
        const policy = gcraPolicy(limit, windowMs);
        const state: GcraState = { tatMs: 0, tatFrac: 0 };
        const reference = new ReferenceBucket(limit, windowMs);
        // Gaps on the scale of the emission interval, so the bucket is near empty, full, and in between.
        const step = Math.max(1, Math.ceil(windowMs / limit));
        let now = EPOCH + start;
        for (const event of events) {
          now += event.gap % (3 * step);
          const n = 1 + (event.n % limit);
          if (event.refund === 0) {
            gcraRefund(state, policy, now, n);
            reference.refund(now, n);
            continue;
          }
          const got = gcraDecide(state, policy, now, n);
          seen[got.admitted ? 'admitted' : 'denied']++;
          const want = reference.take(now, n);
          if (JSON.stringify(got) !== JSON.stringify(want)) {
            throw new Error(`limit ${limit}/${windowMs} ms, take ${n} at +${now - EPOCH}: got ${JSON.stringify(got)}, reference ${JSON.stringify(want)}`);
          }
        }
      },
    ),
    { numRuns: 600 },
  );
  t.ok(seen.admitted > 5000 && seen.denied > 5000, `compared ${seen.admitted} admissions and ${seen.denied} denials`);
});

t.test('a burst of limit is admitted at once, then one per emission interval', async (t) => {
  const policy = gcraPolicy(20, 60_000); // T = 3000 ms
  const state: GcraState = { tatMs: 0, tatFrac: 0 };
  let admitted = 0;
  for (let i = 0; i < 40; i++) if (gcraDecide(state, policy, EPOCH, 1).admitted) admitted++;
  t.equal(admitted, 20);
  const denied = gcraDecide(state, policy, EPOCH, 1);
  t.same(denied, { admitted: false, remaining: 0, resetMs: 60_000, retryAfterMs: 3000 });
  t.notOk(gcraDecide(state, policy, EPOCH + 2999, 1).admitted, 'not before the interval');
  t.same(gcraDecide(state, policy, EPOCH + 3000, 1), { admitted: true, remaining: 0, resetMs: 60_000, retryAfterMs: 0 });
  t.same(gcraDecide(state, policy, EPOCH + 3000 + 60_000, 5), { admitted: true, remaining: 15, resetMs: 15_000, retryAfterMs: 0 });
});

t.test('taking n at once: all or nothing, retry-after is when n are there', async (t) => {
  const policy = gcraPolicy(7, 1000); // T = 142.857... ms
  const state: GcraState = { tatMs: 0, tatFrac: 0 };
  t.ok(gcraDecide(state, policy, EPOCH, 5).admitted);
  const denied = gcraDecide(state, policy, EPOCH, 3);
  t.same(denied, { admitted: false, remaining: 2, resetMs: 715, retryAfterMs: 143 }, '5 × 1000/7 = 714.28 ms; one more token in 142.86 ms');
  t.equal(gcraAvailable(state, policy, EPOCH), 2, 'a denial takes nothing');
  t.ok(gcraDecide(state, policy, EPOCH + 143, 3).admitted);
});

t.test('rescaling to another limit rounds the used time up', async (t) => {
  const state: GcraState = { tatMs: 100, tatFrac: 1 }; // 100 + 1/3 ms
  gcraRescale(state, 3, 2);
  t.same(state, { tatMs: 100, tatFrac: 1 }, '100.333 -> 100.5');
  const near: GcraState = { tatMs: 100, tatFrac: 9 }; // 100.9
  gcraRescale(near, 10, 2);
  t.same(near, { tatMs: 101, tatFrac: 0 }, '100.9 -> 101');
});

t.test('policies out of the exact range are refused with the reason', async (t) => {
  t.throws(() => gcraPolicy(0, 1000), /limit must be an integer 1\.\./);
  t.throws(() => gcraPolicy(1.5, 1000), /limit must be an integer/);
  t.throws(() => gcraPolicy(MAX_LIMIT + 1, 1000), /limit must be an integer/);
  t.throws(() => gcraPolicy(10, 0), /windowMs must be an integer/);
  t.throws(() => gcraPolicy(MAX_LIMIT, 31 * 24 * 3600 * 1000), /limit × windowMs must be below 2\^53/);
  t.same(gcraPolicy(7, 60_000), { limit: 7, windowMs: 60_000, stepMs: 8571, stepFrac: 3 });
});
