// The `local` store's leases (src/stores/lease-bank.ts, lease-client.ts) with 2..4 simulated workers
// on a virtual clock (test/helpers/lease-sim.ts): one limit for the instance, never over-admitted,
// never under-admitted for long, bounded memory.
import fc from 'fast-check';
import t from 'tap';
import { StoreError } from '../../src/stores/store-errors.js';
import { type GcraState, type RateDecision, gcraPolicy, gcraTryTake } from '../../src/stores/gcra.js';
import { MAX_KEY_LENGTH } from '../../src/stores/keys.js';
import { LeaseBank } from '../../src/stores/lease-bank.js';
import { LeaseClient } from '../../src/stores/lease-client.js';
import type { LeaseBankMessage, LeaseWorkerMessage } from '../../src/stores/lease-messages.js';
import { LeaseSim, settle } from '../helpers/lease-sim.js';

const LIMIT_20 = gcraPolicy(20, 60_000);

/** The oracle: one GCRA bucket that sees every take at its instant. */
class Central {
  private readonly state: GcraState = { tatMs: 0, tatFrac: 0 };
  admitted = 0;
  constructor(private readonly policy = LIMIT_20) {}
  take(now: number): boolean {
    const ok = gcraTryTake(this.state, this.policy, now, 1);
    if (ok) this.admitted++;
    return ok;
  }
}

t.test('a limit of 20 admits 20 of 40 sequential requests spread over 2 workers', async (t) => {
  for (const spread of ['alternating', 'random'] as const) {
    const sim = new LeaseSim({ workers: 2 });
    let admitted = 0;
    for (let i = 0; i < 40; i++) {
      sim.now += 10;
      const worker = spread === 'alternating' ? i % 2 : Math.floor(Math.random() * 2);
      if ((await settle(sim, sim.take(worker, 'ip:203.0.113.7', LIMIT_20))).admitted) admitted++;
    }
    t.equal(admitted, 20, `${spread}: 20 admitted`);
    sim.close();
  }
});

t.test('a limit of 20 admits 20 of 40 concurrent requests over 2..4 workers, whatever order the messages take', async (t) => {
  for (let workers = 2; workers <= 4; workers++) {
    for (let round = 0; round < 30; round++) {
      const sim = new LeaseSim({ workers });
      const takes: Array<Promise<RateDecision> | RateDecision> = [];
      for (let i = 0; i < 40; i++) takes.push(sim.take(i % workers, 'ip:203.0.113.7', LIMIT_20));
      const order = Array.from({ length: 64 }, () => Math.floor(Math.random() * 8));
      sim.drain(order);
      const decisions = await Promise.all(takes);
      const admitted = decisions.filter((d) => d.admitted).length;
      if (admitted !== 20) t.fail(`${workers} workers, order ${order}: ${admitted} admitted`);
      const denied = decisions.find((d) => !d.admitted);
      if (denied === undefined || denied.retryAfterMs !== 3000) t.fail(`denial says retry after ${denied?.retryAfterMs}`);
      sim.close();
    }
  }
  t.pass('20 admitted in 90 runs');
});

t.test('with real timers and asynchronous delivery: 20 of 40 concurrent, then the sweep timer returns the unused tokens', async (t) => {
  const bank: LeaseBank = new LeaseBank({
    send: (w, message) => setImmediate(() => workers[w]!.receive(JSON.parse(JSON.stringify(message)))),
  });
  const workers = [0, 1].map(
    (w) => new LeaseClient({ send: (message) => setImmediate(() => bank.receive(w, JSON.parse(JSON.stringify(message)))) }),
  );
  t.teardown(() => {
    for (const worker of workers) worker.close();
    bank.close();
  });
  const decisions = await Promise.all(Array.from({ length: 40 }, (_, i) => workers[i % 2]!.take('ip:203.0.113.9', LIMIT_20)));
  t.equal(decisions.filter((d) => d.admitted).length, 20);
  // Grow a lease on a roomy key, then leave it: the idle sweep (every 25 ms, idle after 100 ms) gives it back.
  const roomy = gcraPolicy(1000, 2_000_000_000); // nothing refills while the test runs
  for (let i = 0; i < 30; i++) await workers[0]!.take('roomy', roomy);
  t.ok(workers[0]!.heldTokens('roomy') > 0, `worker 0 holds ${workers[0]!.heldTokens('roomy')} unused tokens`);
  const started = Date.now();
  while (bank.inspect('roomy')!.held > 0 && Date.now() - started < 3000) await new Promise((resolve) => setTimeout(resolve, 10));
  t.equal(bank.inspect('roomy')!.held, 0, `returned after ${Date.now() - started} ms`);
  t.equal(bank.inspect('roomy')!.available, 1000 - 30, 'the 30 spent stay spent');
});

t.test('the sweep timers run only while there are keys: an idle worker or primary is not woken', async (t) => {
  let now = 1_000_000;
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  const until = async (done: () => boolean): Promise<void> => {
    for (let i = 0; i < 300 && !done(); i++) await sleep(10);
  };
  const bank: LeaseBank = new LeaseBank({
    now: () => now,
    sweepIntervalMs: 5,
    send: (_w, message) => setImmediate(() => client.receive(JSON.parse(JSON.stringify(message)))),
  });
  const client = new LeaseClient({ now: () => now, sweepIntervalMs: 5, send: (message) => setImmediate(() => bank.receive(0, JSON.parse(JSON.stringify(message)))) });
  t.teardown(() => {
    client.close();
    bank.close();
  });
  let clientSweeps = 0;
  let bankSweeps = 0;
  const clientSweep = client.sweep.bind(client);
  const bankSweep = bank.sweep.bind(bank);
  client.sweep = () => {
    clientSweeps++;
    clientSweep();
  };
  bank.sweep = () => {
    bankSweeps++;
    bankSweep();
  };
  await sleep(40);
  t.equal(clientSweeps + bankSweeps, 0, 'no key yet: no sweep');
  t.ok((await client.take('ip:203.0.113.10', LIMIT_20)).admitted);
  // Sweeps every 5 ms, polled for up to 3 s: timers fire late on a busy host.
  await until(() => clientSweeps > 0 && bankSweeps > 0);
  t.ok(clientSweeps > 0 && bankSweeps > 0, `a key: both sweep (client ${clientSweeps}, bank ${bankSweeps})`);
  // Ten idle minutes later: the lease goes back, the key is forgotten, the full bucket dropped.
  now += 600_000;
  const started = Date.now();
  while ((bank.stats().keys > 0 || client.heldTokens('ip:203.0.113.10') > 0) && Date.now() - started < 2000) await sleep(10);
  t.equal(bank.stats().keys, 0, 'the bank dropped the bucket');
  // The client forgets the key at a sweep of its own: wait (up to 3 s) for 60 ms without a sweep;
  // sweeps that went on every 5 ms would never give one.
  let after = [clientSweeps, bankSweeps];
  for (const deadline = Date.now() + 3000; Date.now() < deadline; ) {
    after = [clientSweeps, bankSweeps];
    await sleep(60);
    if (clientSweeps === after[0] && bankSweeps === after[1]) break;
  }
  t.same([clientSweeps, bankSweeps], after, 'no key left: the sweeps stopped');
  // And start again with the next key.
  t.ok((await client.take('ip:203.0.113.11', LIMIT_20)).admitted);
  await until(() => clientSweeps > after[0]! && bankSweeps > after[1]!);
  t.ok(clientSweeps > after[0]! && bankSweeps > after[1]!, 'a new key: both sweep again');
});

t.test('one worker (of 4) gets the full limit, with exact remaining, reset and retry-after', async (t) => {
  const sim = new LeaseSim({ workers: 4 });
  const remaining: number[] = [];
  const resets: number[] = [];
  let denied: RateDecision | undefined;
  for (let i = 0; i < 40; i++) {
    const decision = await settle(sim, sim.take(2, 'consumer:alice', LIMIT_20));
    if (decision.admitted) {
      remaining.push(decision.remaining);
      resets.push(decision.resetMs);
    } else {
      denied ??= decision;
    }
  }
  t.same(remaining, Array.from({ length: 20 }, (_, i) => 19 - i), 'remaining counts down 19..0');
  // The bucket's own reset after each take: one emission interval (3 s) per token spent, whatever
  // the worker holds leased and has not spent (those are told as remaining).
  t.same(resets, Array.from({ length: 20 }, (_, i) => (i + 1) * 3000), 'reset grows by 3 s a take, with remaining');
  t.same(resets.at(-1), 60_000, 'empty bucket: full again in the window');
  t.same(denied, { admitted: false, remaining: 0, resetMs: 60_000, retryAfterMs: 3000 });
  sim.now += 3000;
  t.ok((await settle(sim, sim.take(2, 'consumer:alice', LIMIT_20))).admitted, 'one token refilled after the emission interval');
  t.notOk((await settle(sim, sim.take(2, 'consumer:alice', LIMIT_20))).admitted);
  sim.close();
});

t.test('a hot key costs a few messages per 1,000 requests; a cold key one round trip at most', async (t) => {
  const sim = new LeaseSim({ workers: 2 });
  const roomy = gcraPolicy(1_000_000, 60_000);
  let admitted = 0;
  const requests = 20_000;
  for (let i = 0; i < requests; i++) {
    if (i % 2 === 0) sim.now += 1; // 2,000 requests/s over the two workers
    if (i % 50 === 0) sim.sweep(); // every 25 ms, as the sweep timer would
    if ((await settle(sim, sim.take(i % 2, 'global', roomy))).admitted) admitted++;
  }
  t.equal(admitted, requests);
  const perThousand = (sim.messages / requests) * 1000;
  t.comment(`hot key at 1,000 req/s per worker: ${perThousand.toFixed(2)} IPC messages per 1,000 requests`);
  t.ok(perThousand < 10, `${perThousand.toFixed(2)} messages per 1,000 requests`);

  const before = sim.messages;
  for (let i = 0; i < 100; i++) await settle(sim, sim.take(0, `ip:198.51.100.${i}`, roomy));
  t.equal(sim.messages - before, 200, 'cold keys: one acquire and one grant each');
  sim.close();
});

t.test('recall: the bank reclaims another worker\'s unused tokens before it denies', async (t) => {
  const sim = new LeaseSim({ workers: 2 });
  // Worker 0 grows its lease on a burst, then leaves tokens unused.
  for (let i = 0; i < 8; i++) await settle(sim, sim.take(0, 'k', LIMIT_20));
  const heldBefore = sim.workers[0]!.heldTokens('k');
  t.ok(heldBefore > 0, `worker 0 holds ${heldBefore} unused tokens`);
  let admittedOn1 = 0;
  for (let i = 0; i < 20; i++) if ((await settle(sim, sim.take(1, 'k', LIMIT_20))).admitted) admittedOn1++;
  t.equal(admittedOn1, 12, 'worker 1 gets everything worker 0 did not spend');
  t.equal(sim.workers[0]!.heldTokens('k'), 0, 'worker 0 gave its tokens back');
  t.ok(sim.bank.stats().recalls >= 1, `${sim.bank.stats().recalls} recall(s)`);
  sim.close();
});

t.test('a recall that a worker does not answer is given up after recallTimeoutMs', async (t) => {
  const sent: Array<[number, LeaseBankMessage]> = [];
  const now = () => 1_000_000;
  const bank = new LeaseBank({ now, sweepIntervalMs: 0, recallTimeoutMs: 30, send: (w, m) => sent.push([w, m]) });
  const acquire = (seq: number, want: number): LeaseWorkerMessage => ({
    type: 'lease-acquire', seq, key: 'k', limit: 2, windowMs: 60_000, want, at: 1_000_000, used: 0, spends: [], returned: 0,
  });
  bank.receive(7, acquire(1, 2));
  t.match(sent.pop(), [7, { type: 'lease-grant', granted: 2 }]);
  // Before the recall is sent (its timer starts then): measured from later, a loaded host made it look early.
  const started = Date.now();
  bank.receive(8, acquire(1, 1));
  t.match(sent.pop(), [7, { type: 'lease-recall', key: 'k' }], 'worker 7 is asked for its tokens');
  while (sent.length === 0 && Date.now() - started < 2000) await new Promise((resolve) => setTimeout(resolve, 5));
  t.match(sent.pop(), [8, { type: 'lease-grant', granted: 0, retryAt: 1_000_000 + 30_000 }], 'denied without worker 7\'s answer (retry when a token would be free had worker 7 spent both)');
  t.ok(Date.now() - started >= 25, 'after the recall timeout');
  t.equal(bank.stats().recallTimeouts, 1);
  bank.close();
});

t.test('a message from a worker already declared gone is ignored', async (t) => {
  const sent: LeaseBankMessage[] = [];
  const bank = new LeaseBank({ now: () => 1_000_000, sweepIntervalMs: 0, send: (_w, m) => sent.push(m) });
  bank.workerGone(3);
  bank.receive(3, { type: 'lease-acquire', seq: 1, key: 'k', limit: 5, windowMs: 1000, want: 5, at: 1_000_000, used: 0, spends: [], returned: 0 });
  t.equal(sent.length, 0);
  t.equal(bank.inspect('k'), undefined, 'no tokens held for it');
  bank.close();
});

t.test('a worker that dies loses its tokens: they count as spent', async (t) => {
  const sim = new LeaseSim({ workers: 3 });
  for (let i = 0; i < 8; i++) await settle(sim, sim.take(0, 'k', LIMIT_20));
  const held = sim.workers[0]!.heldTokens('k');
  t.ok(held > 0, `worker 0 holds ${held}`);
  // A recall in flight to the dying worker must not hold the other workers up.
  const pending = sim.take(1, 'k', LIMIT_20);
  sim.now += 1;
  let admitted = 0;
  sim.kill(0);
  if ((await settle(sim, pending)).admitted) admitted++;
  for (let i = 0; i < 30; i++) if ((await settle(sim, sim.take(i % 2 === 0 ? 1 : 2, 'k', LIMIT_20))).admitted) admitted++;
  t.equal(admitted, 20 - 8 - held, 'the others get what is left, not the dead worker\'s tokens');
  sim.close();
});

t.test('leases go back when they expire and when the key goes idle', async (t) => {
  const sim = new LeaseSim({ workers: 2, client: { leaseMs: 500, idleMs: 100 } });
  for (let i = 0; i < 6; i++) await settle(sim, sim.take(0, 'k', LIMIT_20));
  t.ok(sim.bank.inspect('k')!.held > 0, 'held after a burst');
  sim.now += 99;
  sim.sweep();
  sim.drain();
  t.ok(sim.bank.inspect('k')!.held > 0, 'kept before idleMs');
  sim.now += 1;
  sim.sweep();
  sim.drain();
  t.equal(sim.bank.inspect('k')!.held, 0, 'returned after idleMs');
  t.equal(sim.bank.inspect('k')!.available, 14, 'the 6 spent stay spent');

  // Busy but over-provisioned: the lease expires after leaseMs even though the key is in use.
  const roomy = gcraPolicy(10_000, 1000);
  for (let i = 0; i < 64; i++) await settle(sim, sim.take(1, 'busy', roomy));
  const grants = sim.bank.stats().grants;
  for (let i = 0; i < 10; i++) {
    sim.now += 60;
    sim.sweep();
    sim.drain();
    await settle(sim, sim.take(1, 'busy', roomy));
  }
  t.ok(sim.bank.stats().grants > grants, 'a new lease after the old one expired');
  sim.close();
});

t.test('a bank that does not answer fails the waiting takes after acquireTimeoutMs', async (t) => {
  let now = 5_000;
  const client = new LeaseClient({ now: () => now, sweepIntervalMs: 0, acquireTimeoutMs: 1000, send: () => {} });
  const first = client.take('k', LIMIT_20);
  const second = client.take('k', LIMIT_20);
  t.ok(first instanceof Promise && second instanceof Promise);
  now += 999;
  client.sweep();
  now += 1;
  client.sweep();
  await t.rejects(first as Promise<RateDecision>, StoreError);
  await t.rejects(second as Promise<RateDecision>, { code: 'timeout' });
  t.equal(client.stats().acquireTimeouts, 1);
  client.close();
});

t.test('long keys travel as digests; each is still its own bucket', async (t) => {
  const sim = new LeaseSim({ workers: 2 });
  const long = (c: string) => `header:x-api-client:${c.repeat(10_000)}`;
  const tight = gcraPolicy(1, 60_000);
  t.ok((await settle(sim, sim.take(0, long('a'), tight))).admitted);
  t.notOk((await settle(sim, sim.take(1, long('a'), tight))).admitted, 'same long key, same bucket');
  t.ok((await settle(sim, sim.take(1, long('b'), tight))).admitted, 'another long key, another bucket');
  t.ok(sim.bank.inspect(`~sha256:${'0'.repeat(64)}`) === undefined);
  t.ok(MAX_KEY_LENGTH >= 72);
  sim.close();
});

t.test('memory: 20,000 distinct keys (five times the bank cap) stay within the key caps, and full buckets are dropped', async (t) => {
  const sim = new LeaseSim({ workers: 2, bank: { maxKeys: 4_000 }, client: { maxKeys: 1_000 } });
  const policy = gcraPolicy(5, 1000);
  let admitted = 0;
  for (let i = 0; i < 20_000; i++) {
    if (i % 1000 === 0) sim.now += 1;
    if ((await settle(sim, sim.take(i % 2, `ip:10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`, policy))).admitted) admitted++;
  }
  t.equal(admitted, 20_000, 'each new key has its full burst');
  const bank = sim.bank.stats();
  t.ok(bank.keys <= 4_000, `bank keeps ${bank.keys} keys (cap 4,000), evicted ${bank.evictions}`);
  for (const worker of sim.workers) t.ok(worker.stats().keys <= 1_000, `a worker keeps ${worker.stats().keys} keys (cap 1,000)`);
  sim.now += 10_000; // every bucket full again, every lease idle
  for (let i = 0; i < 40; i++) sim.sweep();
  sim.drain();
  for (let i = 0; i < 40; i++) sim.sweep();
  t.equal(sim.bank.stats().keys, 0, 'full, unheld buckets are dropped');
  for (const worker of sim.workers) t.equal(worker.stats().keys, 0, 'idle keys are forgotten');
  sim.close();
});

interface Arrival {
  gap: number;
  worker: number;
  sweep: boolean;
}

const scheduleArb = (workers: number) =>
  fc.array(
    fc.record({ gap: fc.oneof(fc.constant(0), fc.nat({ max: 50 }), fc.nat({ max: 5000 })), worker: fc.nat({ max: workers - 1 }), sweep: fc.boolean() }),
    { minLength: 1, maxLength: 300, size: 'max' },
  );

t.test('property: sequential requests over 2..4 workers admit what one central GCRA admits, never more, at most 1 less', async (t) => {
  let worst = 0;
  let total = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 2, max: 4 }).chain((workers) => fc.tuple(fc.constant(workers), scheduleArb(workers))),
      fc.integer({ min: 1, max: 30 }),
      fc.integer({ min: 50, max: 20_000 }),
      async ([workers, schedule], limit, windowMs) => {
        const policy = gcraPolicy(limit, windowMs);
        const sim = new LeaseSim({ workers });
        const central = new Central(policy);
        let admitted = 0;
        for (const arrival of schedule as Arrival[]) {
          sim.now += arrival.gap;
          if (arrival.sweep) {
            sim.sweep();
            sim.drain();
          }
          central.take(sim.now);
          if ((await settle(sim, sim.take(arrival.worker, 'k', policy))).admitted) admitted++;
          if (admitted > central.admitted) throw new Error(`over-admitted: ${admitted} > central ${central.admitted}`);
        }
        sim.close();
        worst = Math.max(worst, central.admitted - admitted);
        total += central.admitted;
        return central.admitted - admitted <= 1;
      },
    ),
    { numRuns: 400 },
  );
  t.comment(`largest shortfall: ${worst} (of ${total} admitted centrally over all runs)`);
  t.pass();
});

t.test('property: concurrent takes with messages in flight across time never exceed a central GCRA', async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.integer({ min: 2, max: 4 }),
      fc.integer({ min: 1, max: 25 }),
      fc.integer({ min: 20, max: 5000 }),
      fc.array(
        fc.record({
          gap: fc.oneof(fc.constant(0), fc.nat({ max: 30 }), fc.nat({ max: 3000 })),
          worker: fc.nat(),
          burst: fc.integer({ min: 1, max: 6 }),
          deliver: fc.nat({ max: 12 }),
          sweep: fc.boolean(),
          kill: fc.integer({ min: 0, max: 40 }),
        }),
        { minLength: 1, maxLength: 80 },
      ),
      fc.array(fc.nat(), { minLength: 1, maxLength: 50 }),
      async (workers, limit, windowMs, steps, order) => {
        const policy = gcraPolicy(limit, windowMs);
        const sim = new LeaseSim({ workers });
        const dead = new Set<number>();
        // Every decision with the instant it was made; the oracle replays them in that order.
        const decided: Array<{ at: number; admitted: boolean }> = [];
        const record = (result: ReturnType<LeaseSim['take']>) => {
          if (result instanceof Promise) {
            result.then(
              (d) => decided.push({ at: sim.now, admitted: d.admitted }),
              () => {},
            );
          } else {
            decided.push({ at: sim.now, admitted: result.admitted });
          }
        };
        let o = 0;
        for (const step of steps) {
          sim.now += step.gap;
          if (step.sweep) sim.sweep();
          if (step.kill === 0 && dead.size < workers - 1) {
            const victim = step.worker % workers;
            if (!dead.has(victim)) {
              dead.add(victim);
              sim.kill(victim);
            }
          }
          const worker = step.worker % workers;
          if (!dead.has(worker)) for (let b = 0; b < step.burst; b++) record(sim.take(worker, 'k', policy));
          for (let d = 0; d < step.deliver; d++) {
            sim.deliverOne(order[o++ % order.length]);
            await Promise.resolve();
          }
          await new Promise((resolve) => setImmediate(resolve));
        }
        sim.drain(order);
        await new Promise((resolve) => setImmediate(resolve));
        sim.close();
        const central = new Central(policy);
        let admitted = 0;
        for (const decision of decided) {
          central.take(decision.at);
          if (decision.admitted) admitted++;
        }
        if (admitted > central.admitted) throw new Error(`over-admitted: ${admitted} > central ${central.admitted}`);
      },
    ),
    { numRuns: 300 },
  );
  t.pass();
});
