/*
 * The primary's side of the `local` store: the authoritative bucket of every key, from which workers
 * lease tokens (./lease-client.ts; the protocol and its accuracy are in ./README.md).
 *
 * Books per key: the tokens reported spent (a SpendBook: late, out-of-order reports merged into one
 * GCRA state), and what each worker holds (granted, not yet reported spent or returned). Held tokens
 * count as in the bucket, so the bucket cannot refill past `limit` while a worker sits on them; a
 * grant takes only what is free: available - held.
 */
import { type GcraPolicy, type GcraState, gcraAvailable, gcraConsume, gcraPolicy, samePolicy } from './gcra.js';
import { ClockHand, type ClockEntry, MAX_KEY_LENGTH } from './keys.js';
import type {
  LeaseAcquireMessage,
  LeaseBankMessage,
  LeaseReport,
  LeaseWorkerMessage,
} from './lease-messages.js';
import { SpendBook, countSpends } from './spend-log.js';
import { SweepTimer } from '../sweep-timer.js';

export interface LeaseBankOptions {
  /** Delivers a message to one worker (the primary wires it to that worker's IPC channel). */
  send(workerId: number, message: LeaseBankMessage): void;
  /** Epoch ms, whole; the same clock the workers use. */
  now?: () => number;
  /** Keys kept at most; beyond, the least recently used go (see README: an evicted key starts full). */
  maxKeys?: number;
  /** How long a recall waits for the holders' answers before deciding without them. */
  recallTimeoutMs?: number;
  /** How often full, unheld buckets are dropped; 0: only when sweep() is called. */
  sweepIntervalMs?: number;
}

export const LEASE_BANK_DEFAULTS = {
  maxKeys: 100_000,
  recallTimeoutMs: 50,
  sweepIntervalMs: 250,
} as const;

/** Buckets visited per sweep tick: a tick stays well under a millisecond however many keys there are. */
const SWEEP_BATCH = 5_000;

interface PendingAsk {
  workerId: number;
  seq: number;
  want: number;
}

interface Recall {
  id: number;
  waitingFor: number[];
  timer: NodeJS.Timeout;
}

/** Longest spend list a report may carry (slots): a lease spans at most a few hundred. */
const MAX_REPORT_SLOTS = 100_000;

/** A holder is [workerId, held, since] in `Bucket.holders`: `since` is when its unreported spends can date from. */
const HOLDER = 3;

/** The TAT of a bucket's spends, recomputed (refresh) before each use; one for all buckets. */
const current: GcraState = { tatMs: 0, tatFrac: 0 };
const NO_HOLDERS: number[] = [];

class Bucket implements ClockEntry {
  referenced = true;
  readonly spent = new SpendBook();
  /** Tokens held by workers, in total and per worker (HOLDER triples). */
  held = 0;
  holders: number[] = NO_HOLDERS;
  /** Acquires waiting for a recall to finish. */
  queue: PendingAsk[] | null = null;
  recall: Recall | null = null;

  constructor(public policy: GcraPolicy) {}

  /**
   * Folds the slots no report can land in any more (before every holder's `since`) and brings `state`
   * up to date.
   */
  refresh(now: number): GcraState {
    let before = now;
    const h = this.holders;
    for (let i = 0; i < h.length; i += HOLDER) if (h[i + 2]! < before) before = h[i + 2]!;
    this.spent.fold(this.policy, before);
    return this.spent.tat(this.policy, current);
  }

  heldBy(workerId: number): number {
    const h = this.holders;
    for (let i = 0; i < h.length; i += HOLDER) if (h[i] === workerId) return h[i + 1]!;
    return 0;
  }

  /** Workers holding tokens other than `workerId`. */
  otherHolders(workerId: number): number[] {
    const others: number[] = [];
    const h = this.holders;
    for (let i = 0; i < h.length; i += HOLDER) if (h[i] !== workerId) others.push(h[i]!);
    return others;
  }

  /**
   * Adds `delta` (may be negative) to what a worker holds, never below 0. A worker that starts holding
   * does so `now` (it can spend only after the grant); `reportedAt` moves its `since` forward.
   */
  addHeld(workerId: number, delta: number, now: number, reportedAt = 0): void {
    const h = this.holders;
    for (let i = 0; i < h.length; i += HOLDER) {
      if (h[i] !== workerId) continue;
      const applied = Math.max(delta, -h[i + 1]!);
      h[i + 1]! += applied;
      this.held += applied;
      if (h[i + 1] === 0) {
        h.splice(i, HOLDER);
        if (h.length === 0) this.holders = NO_HOLDERS;
      }
      else if (reportedAt > h[i + 2]!) h[i + 2] = Math.min(reportedAt, now);
      return;
    }
    if (delta <= 0) return;
    if (this.holders === NO_HOLDERS) this.holders = [workerId, delta, now];
    else this.holders.push(workerId, delta, now);
    this.held += delta;
  }
}

export interface LeaseBankStats {
  keys: number;
  grants: number;
  tokensGranted: number;
  denials: number;
  recalls: number;
  recallTimeouts: number;
  evictions: number;
  messagesIn: number;
  messagesOut: number;
  invalidMessages: number;
}

export class LeaseBank {
  private readonly buckets = new Map<string, Bucket>();
  private readonly clock = new ClockHand(this.buckets);
  /** Workers declared gone: a message of theirs still in flight must not make them hold tokens again. */
  private readonly gone = new Set<number>();
  private readonly sendTo: LeaseBankOptions['send'];
  private readonly now: () => number;
  private readonly maxKeys: number;
  private readonly recallTimeoutMs: number;
  /** Runs only while there are buckets. */
  private readonly sweepTimer: SweepTimer;
  private sweepCursor: Iterator<[string, Bucket]> | null = null;
  private recallSeq = 0;
  private readonly counters = {
    grants: 0,
    tokensGranted: 0,
    denials: 0,
    recalls: 0,
    recallTimeouts: 0,
    evictions: 0,
    messagesIn: 0,
    messagesOut: 0,
    invalidMessages: 0,
  };

  constructor(options: LeaseBankOptions) {
    this.sendTo = options.send;
    this.now = options.now ?? Date.now;
    this.maxKeys = options.maxKeys ?? LEASE_BANK_DEFAULTS.maxKeys;
    this.recallTimeoutMs = options.recallTimeoutMs ?? LEASE_BANK_DEFAULTS.recallTimeoutMs;
    this.sweepTimer = new SweepTimer(options.sweepIntervalMs ?? LEASE_BANK_DEFAULTS.sweepIntervalMs, () => this.sweep());
  }

  /** A message from worker `workerId`. Malformed messages are counted and ignored. */
  receive(workerId: number, message: LeaseWorkerMessage): void {
    this.counters.messagesIn++;
    if (this.gone.has(workerId)) return;
    switch (message.type) {
      case 'lease-acquire':
        this.onAcquire(workerId, message);
        return;
      case 'lease-release':
        if (!Array.isArray(message.reports)) break;
        for (const report of message.reports) this.applyReport(workerId, report);
        return;
      case 'lease-recalled': {
        const bucket = this.applyReport(workerId, message);
        if (bucket?.recall?.id === message.recallId) this.recallAnswered(message.key, bucket, workerId);
        return;
      }
    }
    this.counters.invalidMessages++;
  }

  /**
   * A worker is gone (exited, killed). What it held counts as spent now: it may have admitted requests
   * with those tokens and never said so (never over-admit). Its id is never served again (node:cluster
   * does not reuse worker ids).
   */
  workerGone(workerId: number): void {
    this.gone.add(workerId);
    const now = this.now();
    for (const [key, bucket] of this.buckets) {
      const held = bucket.heldBy(workerId);
      if (held > 0) {
        bucket.addHeld(workerId, -held, now);
        bucket.spent.addAt(now, held, bucket.policy);
      }
      if (bucket.queue !== null) bucket.queue = bucket.queue.filter((ask) => ask.workerId !== workerId);
      if (bucket.recall !== null) this.recallAnswered(key, bucket, workerId);
    }
  }

  /** Drops buckets that are full and unheld (the same as no entry). Runs by itself every sweepIntervalMs while there are any. */
  sweep(): void {
    const now = this.now();
    this.sweepCursor ??= this.buckets.entries();
    for (let i = 0; i < SWEEP_BATCH; i++) {
      const next = this.sweepCursor.next();
      if (next.done === true) {
        this.sweepCursor = null;
        break;
      }
      const [key, bucket] = next.value;
      if (isIdle(bucket, now)) this.buckets.delete(key);
    }
    if (this.buckets.size === 0) this.sweepTimer.stop();
  }

  stats(): LeaseBankStats {
    return { keys: this.buckets.size, ...this.counters };
  }

  /** What the bank knows of a key (tests, debugging). */
  inspect(key: string): { available: number; held: number; holders: number[] } | undefined {
    // holders: [workerId, held, since, ...]
    const bucket = this.buckets.get(key);
    if (bucket === undefined) return undefined;
    const now = this.now();
    return { available: gcraAvailable(bucket.refresh(now), bucket.policy, now), held: bucket.held, holders: [...bucket.holders] };
  }

  close(): void {
    this.sweepTimer.close();
    for (const bucket of this.buckets.values()) if (bucket.recall !== null) clearTimeout(bucket.recall.timer);
    this.buckets.clear();
  }

  private send(workerId: number, message: LeaseBankMessage): void {
    this.counters.messagesOut++;
    this.sendTo(workerId, message);
  }

  private onAcquire(workerId: number, message: LeaseAcquireMessage): void {
    let policy: GcraPolicy;
    try {
      policy = gcraPolicy(message.limit, message.windowMs);
    } catch {
      this.counters.invalidMessages++;
      return;
    }
    if (!validReport(message) || !isCount(message.seq) || !isCount(message.want) || message.want < 1) {
      this.counters.invalidMessages++;
      return;
    }
    let bucket = this.buckets.get(message.key);
    if (bucket === undefined) {
      bucket = this.createBucket(message.key, policy);
    } else {
      bucket.referenced = true;
      if (!samePolicy(bucket.policy, policy.limit, policy.windowMs)) {
        bucket.spent.rescale(bucket.policy.limit, policy.limit);
        bucket.policy = policy;
      }
    }
    this.applyReportTo(bucket, workerId, message);
    const ask: PendingAsk = { workerId, seq: message.seq, want: Math.min(message.want, policy.limit) };
    if (bucket.recall !== null) (bucket.queue ??= []).push(ask);
    else this.decide(message.key, bucket, ask, true);
  }

  private createBucket(key: string, policy: GcraPolicy): Bucket {
    if (this.buckets.size >= this.maxKeys) {
      this.clock.evictOne(
        (b) => b.recall !== null || b.queue !== null,
        () => this.counters.evictions++,
      );
    }
    const bucket = new Bucket(policy);
    this.buckets.set(key, bucket);
    this.sweepTimer.start();
    return bucket;
  }

  private applyReport(workerId: number, report: LeaseReport): Bucket | undefined {
    if (!validReport(report)) {
      this.counters.invalidMessages++;
      return undefined;
    }
    const bucket = this.buckets.get(report.key);
    if (bucket !== undefined) this.applyReportTo(bucket, workerId, report);
    return bucket;
  }

  private applyReportTo(bucket: Bucket, workerId: number, report: LeaseReport): void {
    if (report.used > 0) bucket.spent.addAll(report.spends, bucket.policy);
    bucket.addHeld(workerId, -(report.used + report.returned), this.now(), report.at);
  }

  private decide(key: string, bucket: Bucket, ask: PendingAsk, mayRecall: boolean): void {
    const now = this.now();
    const state = bucket.refresh(now);
    const free = Math.max(0, gcraAvailable(state, bucket.policy, now) - bucket.held);
    if (free >= 1) {
      const sharers = 1 + bucket.otherHolders(ask.workerId).length;
      const granted = Math.min(ask.want, Math.max(1, Math.floor(free / sharers)));
      bucket.addHeld(ask.workerId, granted, now);
      this.counters.grants++;
      this.counters.tokensGranted += granted;
      this.send(ask.workerId, {
        type: 'lease-grant',
        seq: ask.seq,
        key,
        granted,
        free: free - granted,
        fullAt: this.fullAt(bucket, state, now),
        retryAt: 0,
      });
      return;
    }
    if (mayRecall && this.startRecall(key, bucket, ask)) return;
    this.counters.denials++;
    this.send(ask.workerId, {
      type: 'lease-grant',
      seq: ask.seq,
      key,
      granted: 0,
      free: 0,
      fullAt: this.fullAt(bucket, state, now),
      retryAt: this.retryAt(bucket, state, now),
    });
  }

  /** Asks every other holder of the key for its tokens; the ask waits. False when nobody else holds any. */
  private startRecall(key: string, bucket: Bucket, ask: PendingAsk): boolean {
    const waitingFor = bucket.otherHolders(ask.workerId);
    if (waitingFor.length === 0) return false;
    this.counters.recalls++;
    const id = ++this.recallSeq;
    const timer = setTimeout(() => {
      if (bucket.recall?.id !== id) return;
      this.counters.recallTimeouts++;
      this.finishRecall(key, bucket);
    }, this.recallTimeoutMs);
    timer.unref();
    bucket.recall = { id, waitingFor, timer };
    (bucket.queue ??= []).push(ask);
    for (const workerId of waitingFor) this.send(workerId, { type: 'lease-recall', recallId: id, key });
    return true;
  }

  private recallAnswered(key: string, bucket: Bucket, workerId: number): void {
    const recall = bucket.recall;
    if (recall === null) return;
    const at = recall.waitingFor.indexOf(workerId);
    if (at >= 0) recall.waitingFor.splice(at, 1);
    if (recall.waitingFor.length === 0) this.finishRecall(key, bucket);
  }

  /** Decides the asks that waited, in arrival order, with what came back; no second recall. */
  private finishRecall(key: string, bucket: Bucket): void {
    if (bucket.recall !== null) clearTimeout(bucket.recall.timer);
    bucket.recall = null;
    const queue = bucket.queue;
    bucket.queue = null;
    if (queue !== null) for (const ask of queue) this.decide(key, bucket, ask, false);
  }

  /** When the bucket is full again if every held token is spent now (whole ms, rounded up). */
  private fullAt(bucket: Bucket, state: GcraState, now: number): number {
    const at = { tatMs: state.tatMs, tatFrac: state.tatFrac };
    gcraConsume(at, bucket.policy, now, bucket.held);
    return at.tatMs + (at.tatFrac > 0 ? 1 : 0);
  }

  /**
   * When one token is free (available - held >= 1) if the held tokens are spent now and none comes
   * back: max(TAT, now) + (held + 1) * T - windowMs, at least 1 ms ahead.
   */
  private retryAt(bucket: Bucket, state: GcraState, now: number): number {
    const at = { tatMs: state.tatMs, tatFrac: state.tatFrac };
    gcraConsume(at, bucket.policy, now, bucket.held + 1);
    const when = at.tatMs - bucket.policy.windowMs + (at.tatFrac > 0 ? 1 : 0);
    return Math.max(when, now + 1);
  }
}

function isIdle(bucket: Bucket, now: number): boolean {
  return bucket.held === 0 && bucket.recall === null && bucket.queue === null && bucket.refresh(now).tatMs < now;
}

function isCount(value: unknown): value is number {
  return Number.isSafeInteger(value) && (value as number) >= 0;
}

function validReport(report: LeaseReport): boolean {
  if (
    typeof report !== 'object' ||
    report === null ||
    typeof report.key !== 'string' ||
    report.key.length > MAX_KEY_LENGTH ||
    !isCount(report.used) ||
    !isCount(report.returned) ||
    !isCount(report.at)
  ) {
    return false;
  }
  return countSpends(report.spends, MAX_REPORT_SLOTS) === report.used;
}
