/*
 * GCRA (generic cell rate algorithm): `limit` requests per `windowMs`, a burst of up to `limit` at once,
 * then admission at the refill rate, one token every emission interval T = windowMs / limit.
 *
 * The state is one instant, the theoretical arrival time (TAT): the bucket is full when TAT <= now, and
 * each token taken pushes TAT one T further. Taking n tokens at `now` is admitted when
 * max(TAT, now) + n*T - now <= windowMs.
 *
 * Exact arithmetic: T is rarely a whole number of ms (60000 / 7), and a float TAT near Date.now()
 * (~1.8e12) has a resolution of about 0.0002 ms that rounding errors would eat into at every take. TAT is
 * kept as whole milliseconds plus a fraction in units of 1/limit ms (`tatMs + tatFrac / limit`,
 * 0 <= tatFrac < limit), and T as `stepMs + stepFrac / limit`, so every operation is integer arithmetic
 * that stays exact below 2^53 (checked by `gcraPolicy`). `now` is whole milliseconds (Date.now()).
 *
 * The same arithmetic runs in Redis as Lua (./redis-gcra.ts); tests check both against a plain
 * token-bucket simulation in BigInt rationals.
 */

/** A validated rate: `limit` tokens per `windowMs`, with the emission interval precomputed. */
export interface GcraPolicy {
  readonly limit: number;
  readonly windowMs: number;
  /** Whole ms of the emission interval T = windowMs / limit. */
  readonly stepMs: number;
  /** The rest of T, in units of 1/limit ms. */
  readonly stepFrac: number;
}

/** Theoretical arrival time: `tatMs + tatFrac / limit` ms. `{ tatMs: 0, tatFrac: 0 }` is a full bucket. */
export interface GcraState {
  tatMs: number;
  tatFrac: number;
}

/** Upper bounds that keep every intermediate value an exact integer (limit² and limit × windowMs < 2^53). */
export const MAX_LIMIT = 10_000_000;
export const MAX_WINDOW_MS = 31 * 24 * 3600 * 1000;

export function gcraPolicy(limit: number, windowMs: number): GcraPolicy {
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
    throw new RangeError(`rate limit: limit must be an integer 1..${MAX_LIMIT}, got ${limit}`);
  }
  if (!Number.isInteger(windowMs) || windowMs < 1 || windowMs > MAX_WINDOW_MS) {
    throw new RangeError(`rate limit: windowMs must be an integer 1..${MAX_WINDOW_MS} (31 days), got ${windowMs}`);
  }
  const product = gcraProductProblem(limit, windowMs);
  if (product !== null) throw new RangeError(`rate limit: ${product}`);
  return { limit, windowMs, stepMs: Math.floor(windowMs / limit), stepFrac: windowMs % limit };
}

/** Why `limit` and `windowMs` (each in its range) cannot be one policy, or null: the config check and gcraPolicy say it alike. */
export function gcraProductProblem(limit: number, windowMs: number): string | null {
  if (limit * windowMs <= Number.MAX_SAFE_INTEGER) return null;
  return `limit × windowMs must be below 2^53, got ${limit} × ${windowMs} (= ${limit * windowMs}): the arithmetic would no longer be exact; lower the limit or the window`;
}

export function samePolicy(policy: GcraPolicy, limit: number, windowMs: number): boolean {
  return policy.limit === limit && policy.windowMs === windowMs;
}

/** Moves the state to max(TAT, now): a TAT in the past means a full bucket. */
function catchUp(state: GcraState, now: number): void {
  if (state.tatMs < now) {
    state.tatMs = now;
    state.tatFrac = 0;
  }
}

/** TAT += n * T. */
function advance(state: GcraState, policy: GcraPolicy, n: number): void {
  const frac = state.tatFrac + n * policy.stepFrac;
  const carry = Math.floor(frac / policy.limit);
  state.tatMs += n * policy.stepMs + carry;
  state.tatFrac = frac - carry * policy.limit;
}

/** Whole tokens in the bucket at `now` (0..limit). */
export function gcraAvailable(state: GcraState, policy: GcraPolicy, now: number): number {
  if (state.tatMs < now || (state.tatMs === now && state.tatFrac === 0)) return policy.limit;
  // tokens = (now + windowMs - TAT) / T = ((now + windowMs - tatMs) * limit - tatFrac) / windowMs
  const scaled = (now - state.tatMs + policy.windowMs) * policy.limit - state.tatFrac;
  return scaled <= 0 ? 0 : Math.floor(scaled / policy.windowMs);
}

/** Whole ms until the bucket is full again (0 when it is). */
export function gcraMsUntilFull(state: GcraState, now: number): number {
  if (state.tatMs < now) return 0;
  return state.tatMs - now + (state.tatFrac > 0 ? 1 : 0);
}

/** Whole ms until `n` tokens are available (0 when they are now). */
export function gcraMsUntilAvailable(state: GcraState, policy: GcraPolicy, now: number, n: number): number {
  // Earliest t with max(TAT, t) + n*T - windowMs <= t, i.e. t >= TAT + n*T - windowMs.
  const at = { tatMs: state.tatMs, tatFrac: state.tatFrac };
  advance(at, policy, n);
  const wait = at.tatMs - policy.windowMs + (at.tatFrac > 0 ? 1 : 0) - now;
  return wait > 0 ? wait : 0;
}

/** Takes `n` tokens if there are `n`; mutates the state only when it does. */
export function gcraTryTake(state: GcraState, policy: GcraPolicy, now: number, n: number): boolean {
  const tatMs = state.tatMs < now ? now : state.tatMs;
  const tatFrac = state.tatMs < now ? 0 : state.tatFrac;
  const frac = tatFrac + n * policy.stepFrac;
  const carry = Math.floor(frac / policy.limit);
  const newMs = tatMs + n * policy.stepMs + carry;
  const newFrac = frac - carry * policy.limit;
  // Admitted when newTAT - now <= windowMs.
  const ahead = newMs - now;
  if (ahead > policy.windowMs || (ahead === policy.windowMs && newFrac > 0)) return false;
  state.tatMs = newMs;
  state.tatFrac = newFrac;
  return true;
}

/** Takes `n` tokens unconditionally (the bucket may go below empty: used for tokens already spent). */
export function gcraConsume(state: GcraState, policy: GcraPolicy, now: number, n: number): void {
  catchUp(state, now);
  advance(state, policy, n);
}

/**
 * Gives back `n` unused tokens taken earlier: TAT moves back n*T, never before `now` (a bucket holds at
 * most `limit`). Same state as if they had never been taken, except that decisions made meanwhile saw
 * fewer tokens (conservative).
 */
export function gcraRefund(state: GcraState, policy: GcraPolicy, now: number, n: number): void {
  const back = n * policy.stepFrac;
  const borrow = Math.ceil((back - state.tatFrac) / policy.limit);
  state.tatMs -= n * policy.stepMs + (borrow > 0 ? borrow : 0);
  state.tatFrac = state.tatFrac - back + (borrow > 0 ? borrow : 0) * policy.limit;
  if (state.tatMs < now) {
    state.tatMs = now;
    state.tatFrac = 0;
  }
}

/**
 * Re-expresses a state kept under another limit (a reload changed the policy): the fraction is in
 * units of 1/limit, rounded up (never fewer tokens used than before).
 */
export function gcraRescale(state: GcraState, fromLimit: number, toLimit: number): void {
  if (fromLimit === toLimit || state.tatFrac === 0) return;
  const frac = Math.ceil((state.tatFrac * toLimit) / fromLimit);
  if (frac >= toLimit) {
    state.tatMs += 1;
    state.tatFrac = 0;
  } else {
    state.tatFrac = frac;
  }
}

/** What a rate-limit store answers for one take. */
export interface RateDecision {
  admitted: boolean;
  /** Tokens left after this decision (what `RateLimit: r=` says). */
  remaining: number;
  /** Ms until the bucket is full again (`RateLimit: t=`, rounded up to seconds by the caller). */
  resetMs: number;
  /** When denied: ms until a token is available (`Retry-After`, rounded up to seconds). 0 when admitted. */
  retryAfterMs: number;
}

/** One take of `n` tokens with the full decision. n must be 1..limit. */
export function gcraDecide(state: GcraState, policy: GcraPolicy, now: number, n: number): RateDecision {
  const admitted = gcraTryTake(state, policy, now, n);
  return {
    admitted,
    remaining: gcraAvailable(state, policy, now),
    resetMs: gcraMsUntilFull(state, now),
    retryAfterMs: admitted ? 0 : gcraMsUntilAvailable(state, policy, now, n),
  };
}
