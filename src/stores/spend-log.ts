/*
 * Spends reported late and out of order, merged into one GCRA state with a bounded error.
 *
 * Workers report the tokens they spent some time after spending them (with their next acquire, a
 * release or a recall answer), and different workers' reports arrive in any order. GCRA is
 * order-sensitive near a full bucket (spends while the bucket is full are absorbed by the cap), so
 * folding whole reports into one TAT in arrival order over-counts whenever an older spend is reported
 * after a newer one, and the excess adds up over time.
 *
 * So spends are kept per time slot (`slotMs` wide, the same boundaries on every worker): for each slot,
 * the number of spends `c` and `lt`, the TAT those spends alone produce (from an empty history). The
 * TAT of everything, starting from the folded state `base`, is then
 *
 *     max(base + K*T, max over slots j of (lt_j + N_j * T))
 *
 * with K all spends and N_j the spends in slots after j: exact, whatever order the slots were
 * reported in. Within one slot, spends of different workers are merged report after report
 * (lt = max(lt + c'*T, lt')), which is never below the truth and at most the slot's width above it.
 * So the bank never over-admits, and under-admits by at most slotMs / T tokens (rounded up), only when
 * two workers spent in the same slot near a full bucket.
 *
 * Old slots are folded into `base` (exact) once no report about them can come any more: the bank
 * knows, per worker holding tokens, since when its unreported spends can date (its last report, or
 * the grant when it held nothing), and folds only slots ending before the earliest of those. Beyond
 * MAX_SLOTS slots the oldest are folded anyway; a spend reported after its slot was folded counts at
 * the fold boundary (later than it happened: conservative).
 */
import { type GcraPolicy, type GcraState, gcraConsume, gcraRescale } from './gcra.js';

export const SLOTS_PER_WINDOW = 256;
/** Beyond this many slots the oldest are folded, even if a report about them may still come. */
export const MAX_SLOTS = 256;
/** A slot is [endMs, count, ltMs, ltFrac] in a flat array. */
const WIDTH = 4;

/** Slot width for a policy: windowMs / SLOTS_PER_WINDOW, whole ms, at least 1. */
export function spendSlotMs(policy: GcraPolicy): number {
  return Math.max(1, Math.ceil(policy.windowMs / SLOTS_PER_WINDOW));
}

/** lt += T once, from max(lt, at): one more spend at `at`. */
function spendAt(slots: number[], i: number, policy: GcraPolicy, at: number): void {
  let ms = slots[i + 2]!;
  let frac = slots[i + 3]!;
  if (ms < at) {
    ms = at;
    frac = 0;
  }
  frac += policy.stepFrac;
  ms += policy.stepMs;
  if (frac >= policy.limit) {
    frac -= policy.limit;
    ms += 1;
  }
  slots[i + 2] = ms;
  slots[i + 3] = frac;
}

/** Worker side: records one spend at `now` in a flat `[slotEndMs, count, ltMs, ltFrac, ...]` list. */
export function recordSpend(spends: number[], slotMs: number, policy: GcraPolicy, now: number): void {
  const end = (Math.floor(now / slotMs) + 1) * slotMs;
  let last = spends.length - WIDTH;
  if (last < 0 || spends[last] !== end) {
    spends.push(end, 0, 0, 0);
    last = spends.length - WIDTH;
  }
  spends[last + 1]!++;
  spendAt(spends, last, policy, now);
}

/** Whether a report's spend list is well formed: `[slotEndMs, count, ltMs, ltFrac, ...]`; returns the count. */
export function countSpends(spends: unknown, maxSlots: number): number {
  if (!Array.isArray(spends) || spends.length % WIDTH !== 0 || spends.length > WIDTH * maxSlots) return -1;
  let count = 0;
  for (let i = 0; i < spends.length; i += WIDTH) {
    for (let k = 0; k < WIDTH; k++) if (!Number.isSafeInteger(spends[i + k]) || spends[i + k] < 0) return -1;
    count += spends[i + 1];
  }
  return count;
}

/** out = max(out, (ms + frac/limit) + n*T). */
function maxInto(out: GcraState, policy: GcraPolicy, ms: number, frac: number, n: number): void {
  const f = frac + n * policy.stepFrac;
  const carry = Math.floor(f / policy.limit);
  const tatMs = ms + n * policy.stepMs + carry;
  const tatFrac = f - carry * policy.limit;
  if (tatMs > out.tatMs || (tatMs === out.tatMs && tatFrac > out.tatFrac)) {
    out.tatMs = tatMs;
    out.tatFrac = tatFrac;
  }
}

/** Bank side: the spends of one key. */
/** Shared by every book: each use is synchronous and complete before the next. */
const scratch: GcraState = { tatMs: 0, tatFrac: 0 };
const NO_SLOTS: number[] = [];

export class SpendBook {
  /** TAT of the folded spends. */
  private baseMs = 0;
  private baseFrac = 0;
  /** End of the newest folded slot; a spend reported later that is older counts at it. */
  private foldedTo = 0;
  /** `[slotEndMs, count, ltMs, ltFrac, ...]`, ascending by slot end, one entry per slot. */
  private slots: number[] = NO_SLOTS;

  /** Adds a worker's report, flat `[slotEndMs, count, ltMs, ltFrac, ...]` made under `policy`. */
  addAll(spends: readonly number[], policy: GcraPolicy): void {
    for (let i = 0; i < spends.length; i += WIDTH) this.add(spends[i]!, spends[i + 1]!, spends[i + 2]!, spends[i + 3]!, policy);
  }

  /** Adds `count` spends made at `at` or before it (a dead worker's tokens, counted as spent at death). */
  addAt(at: number, count: number, policy: GcraPolicy): void {
    const lt = { tatMs: 0, tatFrac: 0 };
    gcraConsume(lt, policy, at, count);
    this.add(at, count, lt.tatMs, lt.tatFrac, policy);
  }

  private add(endMs: number, count: number, ltMs: number, ltFrac: number, policy: GcraPolicy): void {
    if (count === 0) return;
    if (ltFrac >= policy.limit) {
      // Made under a larger limit (a reload changed it): round up to the next ms.
      ltMs += 1;
      ltFrac = 0;
    }
    if (endMs <= this.foldedTo) {
      // Older than what was folded: as if spent at the fold boundary, after everything folded.
      const lt = { tatMs: 0, tatFrac: 0 };
      gcraConsume(lt, policy, this.foldedTo, count);
      endMs = this.foldedTo + 1;
      ltMs = lt.tatMs;
      ltFrac = lt.tatFrac;
    }
    if (this.slots === NO_SLOTS) {
      // Most keys have one slot at a time: an exact-size array, not push's growth slack.
      this.slots = [endMs, count, ltMs, ltFrac];
      return;
    }
    const slots = this.slots;
    let i = slots.length - WIDTH;
    while (i >= 0 && slots[i]! > endMs) i -= WIDTH;
    if (i >= 0 && slots[i] === endMs) {
      // Same slot, another report: these spends after those (never below the truth, see above).
      const merged = scratch;
      merged.tatMs = ltMs;
      merged.tatFrac = ltFrac;
      maxInto(merged, policy, slots[i + 2]!, slots[i + 3]!, count);
      slots[i + 1]! += count;
      slots[i + 2] = merged.tatMs;
      slots[i + 3] = merged.tatFrac;
    } else {
      slots.splice(i + WIDTH, 0, endMs, count, ltMs, ltFrac);
    }
  }

  /** Folds the slots that end at or before `before` (no spend can be reported in them any more), and the oldest beyond MAX_SLOTS. */
  fold(policy: GcraPolicy, before: number): void {
    const slots = this.slots;
    let i = 0;
    while (i < slots.length && (slots[i]! <= before || slots.length - i > WIDTH * MAX_SLOTS)) {
      // base = max(base + c*T, lt): the slot's spends after everything folded before.
      const folded = scratch;
      folded.tatMs = slots[i + 2]!;
      folded.tatFrac = slots[i + 3]!;
      maxInto(folded, policy, this.baseMs, this.baseFrac, slots[i + 1]!);
      this.baseMs = folded.tatMs;
      this.baseFrac = folded.tatFrac;
      this.foldedTo = slots[i]!;
      i += WIDTH;
    }
    if (i > 0) this.slots = i === slots.length ? NO_SLOTS : slots.slice(i);
  }

  /** Re-expresses the state under a new limit (a reload changed the policy); rounds up. */
  rescale(fromLimit: number, toLimit: number): void {
    const base = { tatMs: this.baseMs, tatFrac: this.baseFrac };
    gcraRescale(base, fromLimit, toLimit);
    this.baseMs = base.tatMs;
    this.baseFrac = base.tatFrac;
    const slots = this.slots;
    for (let i = 0; i < slots.length; i += WIDTH) {
      const lt = { tatMs: slots[i + 2]!, tatFrac: slots[i + 3]! };
      gcraRescale(lt, fromLimit, toLimit);
      slots[i + 2] = lt.tatMs;
      slots[i + 3] = lt.tatFrac;
    }
  }

  /** The TAT of all spends: max(base + K*T, lt_j + N_j*T). Writes it into `out`. */
  tat(policy: GcraPolicy, out: GcraState): GcraState {
    out.tatMs = 0;
    out.tatFrac = 0;
    const slots = this.slots;
    let after = 0;
    for (let i = slots.length - WIDTH; i >= 0; i -= WIDTH) {
      maxInto(out, policy, slots[i + 2]!, slots[i + 3]!, after);
      after += slots[i + 1]!;
    }
    maxInto(out, policy, this.baseMs, this.baseFrac, after);
    return out;
  }

  isEmpty(): boolean {
    return this.slots.length === 0;
  }
}
