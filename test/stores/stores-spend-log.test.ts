// The bank's book of spends (src/stores/spend-log.ts): spends of several workers reported late, in
// batches, in any order, give a TAT never below the true one (no over-admission) and at most one slot
// above it (the documented under-admission bound); exactly the true one when one worker spends.
import fc from 'fast-check';
import t from 'tap';
import { type GcraState, gcraConsume, gcraPolicy } from '../../src/stores/gcra.js';
import { SLOTS_PER_WINDOW, SpendBook, recordSpend, spendSlotMs } from '../../src/stores/spend-log.js';

const EPOCH = 1_767_225_600_000;

function cmp(a: GcraState, b: GcraState): number {
  return a.tatMs !== b.tatMs ? a.tatMs - b.tatMs : a.tatFrac - b.tatFrac;
}

/** Exact TAT of spends taken one by one in time order. */
function trueTat(times: number[], policy: ReturnType<typeof gcraPolicy>): GcraState {
  const state = { tatMs: 0, tatFrac: 0 };
  for (const at of [...times].sort((a, b) => a - b)) gcraConsume(state, policy, at, 1);
  return state;
}

t.test('slot width: windowMs / 256, whole ms, at least 1', async (t) => {
  t.equal(spendSlotMs(gcraPolicy(20, 60_000)), Math.ceil(60_000 / SLOTS_PER_WINDOW));
  t.equal(spendSlotMs(gcraPolicy(1000, 10)), 1);
});

t.test('property: late, batched, reordered reports give a TAT within one slot above the truth, never below', async (t) => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 200 }),
      fc.integer({ min: 10, max: 100_000 }),
      fc.array(
        fc.record({ gap: fc.oneof(fc.constant(0), fc.nat({ max: 100 }), fc.nat({ max: 20_000 })), worker: fc.nat({ max: 3 }), report: fc.nat({ max: 4 }) }),
        { minLength: 1, maxLength: 200 },
      ),
      fc.boolean(),
      (limit, windowMs, events, oneWorker) => {
        const policy = gcraPolicy(limit, windowMs);
        const slotMs = spendSlotMs(policy);
        const book = new SpendBook();
        const unreported: number[][] = [[], [], [], []];
        const unreportedSince: number[] = [0, 0, 0, 0];
        const reported: number[] = [];
        let now = EPOCH;
        const deliver = (worker: number) => {
          const spends: number[] = [];
          for (const at of unreported[worker]!) recordSpend(spends, slotMs, policy, at);
          book.addAll(spends, policy);
          reported.push(...unreported[worker]!);
          unreported[worker] = [];
        };
        for (const event of events) {
          if (oneWorker) event.worker = 0;
          now += event.gap;
          if (unreported[event.worker]!.length === 0) unreportedSince[event.worker] = now;
          unreported[event.worker]!.push(now);
          if (event.report === 0) deliver((event.worker + 1) % 4);
          // The bank folds only before the oldest unreported spend can date from.
          let before = now;
          for (let w = 0; w < 4; w++) if (unreported[w]!.length > 0) before = Math.min(before, unreportedSince[w]!);
          book.fold(policy, before);
          const got = book.tat(policy, { tatMs: 0, tatFrac: 0 });
          const truth = trueTat(reported, policy);
          if (cmp(got, truth) < 0) throw new Error(`below the truth: ${JSON.stringify(got)} < ${JSON.stringify(truth)}`);
          const ceiling = { tatMs: truth.tatMs + slotMs, tatFrac: truth.tatFrac };
          if (cmp(got, ceiling) > 0) {
            throw new Error(`more than a slot (${slotMs} ms) above the truth: ${JSON.stringify(got)} vs ${JSON.stringify(truth)}`);
          }
          if (oneWorker && cmp(got, truth) !== 0) throw new Error(`one worker, not exact: ${JSON.stringify(got)} vs ${JSON.stringify(truth)}`);
        }
      },
    ),
    { numRuns: 500 },
  );
  t.pass();
});

t.test('a spend reported after its slot was folded counts at the fold boundary (later: conservative)', async (t) => {
  const policy = gcraPolicy(10, 10_000); // T = 1000 ms
  const book = new SpendBook();
  book.addAt(EPOCH + 1000, 1, policy);
  book.fold(policy, EPOCH + 1000);
  t.ok(book.isEmpty(), 'folded');
  t.same(book.tat(policy, { tatMs: 0, tatFrac: 0 }), { tatMs: EPOCH + 2000, tatFrac: 0 });
  book.addAt(EPOCH, 1, policy); // older than the fold boundary
  t.same(book.tat(policy, { tatMs: 0, tatFrac: 0 }), { tatMs: EPOCH + 3000, tatFrac: 0 }, 'as if spent at the boundary, after the folded one');
});
