/*
 * A worker's side of the `local` store: takes are answered from tokens leased from the primary's
 * LeaseBank (./lease-bank.ts), so a worker under steady load decides locally and talks to the primary
 * once per lease, not once per request. Protocol, sizing and accuracy: ./README.md.
 */
import { StoreError } from './store-errors.js';
import type { GcraPolicy, RateDecision } from './gcra.js';
import { ClockHand, type ClockEntry, MAX_KEY_LENGTH, boundKey } from './keys.js';
import type { LeaseBankMessage, LeaseGrantMessage, LeaseReport, LeaseWorkerMessage } from './lease-messages.js';
import { recordSpend, spendSlotMs } from './spend-log.js';
import type { RateLimitStore } from './types.js';
import { SweepTimer } from '../sweep-timer.js';

export interface LeaseClientOptions {
  /** Delivers a message to the bank (the worker wires it to process.send). */
  send(message: LeaseWorkerMessage): void;
  /** Epoch ms, whole; the same clock as the bank's. */
  now?: () => number;
  /** A lease's unused tokens go back to the bank this long after the grant. */
  leaseMs?: number;
  /** ...or when the key had no take for this long. */
  idleMs?: number;
  /** Largest lease asked for. */
  maxLeaseTokens?: number;
  /** Keys kept at most (beyond, the least recently used key's tokens go back and its entry goes). */
  maxKeys?: number;
  /** Takes waiting on a grant fail (StoreError `timeout`) when the bank has not answered in this long. */
  acquireTimeoutMs?: number;
  /** How often expiries, idle keys and acquire timeouts are checked; 0: only when sweep() is called. */
  sweepIntervalMs?: number;
}

export const LEASE_CLIENT_DEFAULTS = {
  leaseMs: 500,
  idleMs: 100,
  maxLeaseTokens: 4096,
  maxKeys: 10_000,
  acquireTimeoutMs: 1000,
  sweepIntervalMs: 25,
} as const;

/** A key without a take for this long (and holding nothing) loses its entry; its lease size starts over. */
const FORGET_AFTER_MS = 5_000;
const FORGET_BATCH = 5_000;

/**
 * What `take` returns: the decision itself when the worker's lease answers it (no microtask, no
 * allocation beyond the decision), else a Promise of it (a round trip to the bank). Tell them apart
 * with `instanceof Promise`. The Promise rejects only with a StoreError (`timeout`: the bank did not
 * answer within acquireTimeoutMs; `closed`).
 */
export type TakeResult = RateDecision | Promise<RateDecision>;

interface Waiter {
  resolve(decision: RateDecision): void;
  reject(error: Error): void;
}

/** Shared, frozen: a key allocates its own list at its first spend. */
const NO_SPENDS = Object.freeze([]) as unknown as number[];

class KeyLease implements ClockEntry {
  referenced = true;
  /** Unused leased tokens. */
  tokens = 0;
  /** What the bank counts as held by this worker: tokens + spent since the last report. */
  held = 0;
  /** Spent since the last report, and when (flat `[slotEndMs, count, ltMs, ltFrac, ...]`, see spend-log.ts). */
  used = 0;
  spends: number[] = NO_SPENDS;
  slotMs: number;
  /** From the last grant: free in the bank then, and when the bucket is full if all held is spent. */
  free = 0;
  fullAt = 0;
  /** A denial from the bank holds until then; takes before it are denied without asking. */
  deniedUntil = 0;
  grantedAt = 0;
  lastGrant = 0;
  usedSinceGrant = 0;
  lastTakeAt = 0;
  /** Sequence number of the acquire in flight, 0 when none; when it was sent. */
  inflightSeq = 0;
  inflightSince = 0;
  waiters: Waiter[] | null = null;

  constructor(
    readonly key: string,
    public policy: GcraPolicy,
  ) {
    this.slotMs = spendSlotMs(policy);
  }
}

export interface LeaseClientStats {
  keys: number;
  takes: number;
  /** Takes answered from a lease or a remembered denial, without a round trip. */
  local: number;
  acquires: number;
  messagesOut: number;
  messagesIn: number;
  acquireTimeouts: number;
  evictions: number;
}

export class LeaseClient implements RateLimitStore {
  readonly name = 'local';
  private readonly leases = new Map<string, KeyLease>();
  private readonly clock = new ClockHand(this.leases);
  /** Keys holding tokens (or unreported spends): checked for expiry and idleness at each sweep. */
  private readonly holding = new Set<KeyLease>();
  private readonly inflight = new Set<KeyLease>();
  private readonly sendToBank: LeaseClientOptions['send'];
  private readonly now: () => number;
  private readonly leaseMs: number;
  private readonly idleMs: number;
  private readonly maxLeaseTokens: number;
  private readonly maxKeys: number;
  private readonly acquireTimeoutMs: number;
  /** Runs only while there are keys: an idle worker (or one without rate limits) is not woken 40 times a second. */
  private readonly sweepTimer: SweepTimer;
  private forgetCursor: Iterator<[string, KeyLease]> | null = null;
  private seq = 0;
  private closed = false;
  private readonly counters = {
    takes: 0,
    local: 0,
    acquires: 0,
    messagesOut: 0,
    messagesIn: 0,
    acquireTimeouts: 0,
    evictions: 0,
  };

  constructor(options: LeaseClientOptions) {
    this.sendToBank = options.send;
    this.now = options.now ?? Date.now;
    this.leaseMs = options.leaseMs ?? LEASE_CLIENT_DEFAULTS.leaseMs;
    this.idleMs = options.idleMs ?? LEASE_CLIENT_DEFAULTS.idleMs;
    this.maxLeaseTokens = options.maxLeaseTokens ?? LEASE_CLIENT_DEFAULTS.maxLeaseTokens;
    this.maxKeys = options.maxKeys ?? LEASE_CLIENT_DEFAULTS.maxKeys;
    this.acquireTimeoutMs = options.acquireTimeoutMs ?? LEASE_CLIENT_DEFAULTS.acquireTimeoutMs;
    this.sweepTimer = new SweepTimer(options.sweepIntervalMs ?? LEASE_CLIENT_DEFAULTS.sweepIntervalMs, () => this.sweep());
  }

  /**
   * Takes one token of `key` under `policy` (make it once with gcraPolicy, not per request). `key` is
   * whatever identifies the bucket (e.g. `<middleware id>|<endpoint>|<client address>`); long keys are
   * hashed (keys.ts). A round trip to the bank is bounded by acquireTimeoutMs, not by a per-call
   * budget: the caller races its SLA (see README).
   */
  take(key: string, policy: GcraPolicy): TakeResult {
    this.counters.takes++;
    if (key.length > MAX_KEY_LENGTH) key = boundKey(key);
    const now = this.now();
    let lease = this.leases.get(key);
    if (lease === undefined) {
      lease = this.createLease(key, policy);
    } else {
      lease.referenced = true;
      if (lease.policy !== policy) this.changePolicy(lease, policy);
    }
    lease.lastTakeAt = now;
    if (lease.waiters === null) {
      if (lease.tokens > 0) {
        this.counters.local++;
        lease.tokens--;
        this.spend(lease, now);
        return { admitted: true, remaining: lease.free + lease.tokens, resetMs: resetMs(lease, now), retryAfterMs: 0 };
      }
      if (now < lease.deniedUntil) {
        this.counters.local++;
        return { admitted: false, remaining: 0, resetMs: resetMs(lease, now), retryAfterMs: lease.deniedUntil - now };
      }
    }
    if (this.closed) return Promise.reject(new StoreError(this.name, 'closed', 'closed'));
    const decision = new Promise<RateDecision>((resolve, reject) => {
      (lease.waiters ??= []).push({ resolve, reject });
    });
    if (lease.inflightSeq === 0) this.acquire(lease, now);
    return decision;
  }

  /** A message from the bank. */
  receive(message: LeaseBankMessage): void {
    this.counters.messagesIn++;
    if (message.type === 'lease-grant') this.onGrant(message);
    else if (message.type === 'lease-recall') this.onRecall(message.key, message.recallId);
  }

  /**
   * Gives back expired and idle leases (one message for all), fails takes whose acquire the bank has
   * not answered in time, forgets long-idle keys. Runs by itself every sweepIntervalMs while any key
   * is known (the last one is forgotten FORGET_AFTER_MS after its last take).
   */
  sweep(): void {
    const now = this.now();
    let reports: LeaseReport[] | null = null;
    for (const lease of this.holding) {
      if (lease.waiters !== null || lease.inflightSeq !== 0) continue;
      if (now - lease.lastTakeAt < this.idleMs && now - lease.grantedAt < this.leaseMs) continue;
      (reports ??= []).push(this.report(lease, true));
    }
    if (reports !== null) this.send({ type: 'lease-release', reports });

    for (const lease of this.inflight) {
      if (now - lease.inflightSince < this.acquireTimeoutMs) continue;
      this.counters.acquireTimeouts++;
      this.inflight.delete(lease);
      lease.inflightSeq = 0;
      const waiters = lease.waiters;
      lease.waiters = null;
      const error = new StoreError(this.name, 'timeout', `the lease bank did not answer for key "${lease.key}" within ${this.acquireTimeoutMs} ms`);
      if (waiters !== null) for (const waiter of waiters) waiter.reject(error);
    }

    this.forgetCursor ??= this.leases.entries();
    for (let i = 0; i < FORGET_BATCH; i++) {
      const next = this.forgetCursor.next();
      if (next.done === true) {
        this.forgetCursor = null;
        break;
      }
      const [key, lease] = next.value;
      if (isForgettable(lease, now)) this.leases.delete(key);
    }
    if (this.leases.size === 0) this.sweepTimer.stop();
  }

  /** Gives every held token back and fails waiting takes; later takes fail with StoreError `closed`. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.sweepTimer.close();
    const reports: LeaseReport[] = [];
    for (const lease of this.holding) reports.push(this.report(lease, true));
    if (reports.length > 0) this.send({ type: 'lease-release', reports });
    const error = new StoreError(this.name, 'closed', 'closed');
    for (const lease of this.leases.values()) {
      const waiters = lease.waiters;
      lease.waiters = null;
      if (waiters !== null) for (const waiter of waiters) waiter.reject(error);
    }
  }

  stats(): LeaseClientStats {
    return { keys: this.leases.size, ...this.counters };
  }

  /** Unused tokens this worker holds for a key (tests). */
  heldTokens(key: string): number {
    return this.leases.get(boundKey(key))?.tokens ?? 0;
  }

  private send(message: LeaseWorkerMessage): void {
    this.counters.messagesOut++;
    this.sendToBank(message);
  }

  private createLease(key: string, policy: GcraPolicy): KeyLease {
    if (this.leases.size >= this.maxKeys) {
      this.clock.evictOne(
        (lease) => lease.waiters !== null || lease.inflightSeq !== 0,
        (_key, lease) => {
          this.counters.evictions++;
          if (lease.held > 0) this.send({ type: 'lease-release', reports: [this.report(lease, true)] });
        },
      );
    }
    const lease = new KeyLease(key, policy);
    this.leases.set(key, lease);
    this.sweepTimer.start();
    return lease;
  }

  /**
   * A reload changed the key's limit or window: what the last grant said was the old policy's. A
   * denial held until the old policy's next token would keep refusing (with its Retry-After) under a
   * raised limit, so the next take without a token asks the bank, which decides under the new policy;
   * `free` was counted under the old limit and is no longer told as remaining.
   */
  private changePolicy(lease: KeyLease, policy: GcraPolicy): void {
    lease.policy = policy;
    lease.slotMs = spendSlotMs(policy);
    lease.deniedUntil = 0;
    lease.free = 0;
  }

  private spend(lease: KeyLease, now: number): void {
    lease.used++;
    lease.usedSinceGrant++;
    if (lease.spends === NO_SPENDS) lease.spends = [];
    recordSpend(lease.spends, lease.slotMs, lease.policy, now);
  }

  /** The report of spends since the last one (and, with `returnAll`, of every unused token, given back). */
  private report(lease: KeyLease, returnAll: boolean): LeaseReport {
    const returned = returnAll ? lease.tokens : 0;
    const report: LeaseReport = { key: lease.key, at: this.now(), used: lease.used, spends: lease.spends, returned };
    lease.held -= lease.used + returned;
    lease.tokens -= returned;
    lease.used = 0;
    lease.spends = NO_SPENDS;
    if (lease.held <= 0) {
      lease.held = 0;
      this.holding.delete(lease);
    }
    return report;
  }

  private acquire(lease: KeyLease, now: number): void {
    const waiting = lease.waiters === null ? 1 : lease.waiters.length;
    const want = Math.min(Math.max(this.leaseSize(lease, now), waiting), this.maxLeaseTokens, lease.policy.limit);
    const seq = ++this.seq;
    lease.inflightSeq = seq;
    lease.inflightSince = now;
    this.inflight.add(lease);
    this.counters.acquires++;
    this.send({ type: 'lease-acquire', seq, limit: lease.policy.limit, windowMs: lease.policy.windowMs, want, ...this.report(lease, false) });
  }

  /**
   * Tokens to ask for: what this key spent on this worker during the last lease, scaled to a whole
   * lease lifetime; doubling (from 1) while leases run out in under half their lifetime.
   */
  private leaseSize(lease: KeyLease, now: number): number {
    if (lease.lastGrant === 0) return 1;
    const elapsed = now - lease.grantedAt;
    const cap = 2 * lease.lastGrant;
    if (lease.usedSinceGrant >= lease.lastGrant && 2 * elapsed <= this.leaseMs) return cap;
    const rate = Math.ceil((lease.usedSinceGrant * this.leaseMs) / Math.max(1, elapsed));
    return Math.max(1, Math.min(rate, cap));
  }

  private onGrant(grant: LeaseGrantMessage): void {
    const lease = this.leases.get(grant.key);
    if (lease === undefined) {
      // Evicted while the grant travelled (only after an acquire timeout): give the tokens straight back.
      if (grant.granted > 0) {
        this.send({ type: 'lease-release', reports: [{ key: grant.key, at: this.now(), used: 0, spends: [], returned: grant.granted }] });
      }
      return;
    }
    const now = this.now();
    const answersInflight = grant.seq === lease.inflightSeq;
    if (answersInflight) {
      lease.inflightSeq = 0;
      this.inflight.delete(lease);
    }
    lease.free = grant.free;
    lease.fullAt = grant.fullAt;
    if (grant.granted > 0) {
      lease.tokens += grant.granted;
      lease.held += grant.granted;
      lease.lastGrant = grant.granted;
      lease.grantedAt = now;
      lease.usedSinceGrant = 0;
      lease.deniedUntil = 0;
      this.holding.add(lease);
    } else if (answersInflight) {
      lease.deniedUntil = grant.retryAt;
    }
    const waiters = lease.waiters;
    if (waiters === null) return;
    let served = 0;
    while (served < waiters.length && lease.tokens > 0) {
      lease.tokens--;
      this.spend(lease, now);
      waiters[served++]!.resolve({ admitted: true, remaining: lease.free + lease.tokens, resetMs: resetMs(lease, now), retryAfterMs: 0 });
    }
    if (served === waiters.length) {
      lease.waiters = null;
      return;
    }
    waiters.splice(0, served);
    if (grant.granted === 0 && answersInflight) {
      // The bank is empty even after recalling the other workers' tokens: everyone waiting is denied.
      lease.waiters = null;
      const retryAfterMs = Math.max(1, grant.retryAt - now);
      const reset = resetMs(lease, now);
      for (const waiter of waiters) waiter.resolve({ admitted: false, remaining: 0, resetMs: reset, retryAfterMs });
      return;
    }
    if (lease.inflightSeq === 0) this.acquire(lease, now);
  }

  private onRecall(key: string, recallId: number): void {
    const lease = this.leases.get(key);
    const report: LeaseReport =
      lease === undefined
        ? { key, at: this.now(), used: 0, spends: [], returned: 0 }
        : this.report(lease, true);
    // Contention on this key: start small again.
    if (lease !== undefined) lease.lastGrant = Math.min(lease.lastGrant, 1);
    this.send({ type: 'lease-recalled', recallId, ...report });
  }
}

function msUntil(at: number, now: number): number {
  return at > now ? at - now : 0;
}

/**
 * When the bucket is full again as this worker tells it: the grant's fullAt counts every token this
 * worker holds as spent, but its unspent tokens are told as remaining (`free + tokens`), so they are
 * taken off here too, one emission interval each. Otherwise `t` ran ahead of `r` (limit 5 a 50 s:
 * `r=3;t=30` where the bucket said 20).
 */
function resetMs(lease: KeyLease, now: number): number {
  return msUntil(lease.fullAt - (lease.tokens * lease.policy.windowMs) / lease.policy.limit, now);
}

function isForgettable(lease: KeyLease, now: number): boolean {
  return (
    lease.held === 0 &&
    lease.waiters === null &&
    lease.inflightSeq === 0 &&
    now >= lease.deniedUntil &&
    now - lease.lastTakeAt >= FORGET_AFTER_MS
  );
}
