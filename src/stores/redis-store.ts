/*
 * A `redis` store (docs/reference/stores.md#redis): rate-limit buckets shared by every gateway on the Redis, and
 * Buffer values with a TTL for the response cache. node-redis 5, one connection per worker.
 *
 * A dead or slow Redis costs a caller at most its budget: every command has a timeout
 * (min(commandTimeoutMs, the caller's maxWaitMs)) enforced here, because node-redis's own `timeout`
 * command option stops applying once a command is written to the socket (node-redis PR #3008), which
 * is exactly when a hung server matters. The offline queue is off, so a command while disconnected
 * fails at once. A breaker (./breaker.ts) stops calling Redis after repeated failures. A reply that
 * arrives after its timeout is dropped; the commands a hung server holds are bounded by the breaker
 * (at most `breakerFailures` plus one probe per breakerResetMs). A Redis that answers every write
 * with an error reply (READONLY, OOM, MISCONF) is `failing`. While down or failing the store probes
 * Redis by itself, so it shows ready again without traffic. Details: ./README.md.
 */
// First: node-redis must find the stand-in when it loads (see the module).
import { createRequire } from 'node:module';
import { shimInEffect } from './verbatim-string-shim.js';
import type * as Redis from 'redis';
import { StoreBreaker, type StoreBreakerState } from './store-breaker.js';
import { StoreError } from './store-errors.js';
import type { GcraPolicy, RateDecision } from './gcra.js';
import { boundKey, digestKey } from './keys.js';
import { GCRA_TAKE_EACH_LUA, GCRA_TAKE_EACH_SHA1, GCRA_TAKE_LUA, GCRA_TAKE_SHA1 } from './redis-gcra.js';
import { DELETE_GROUP_LUA, DELETE_GROUP_SHA1, GET_IN_GROUP_LUA, GET_IN_GROUP_SHA1, groupSlot, SET_IN_GROUP_LUA, SET_IN_GROUP_SHA1 } from './redis-groups.js';
import type { GroupRead, KeyValueStore, RateLimitStore } from './types.js';

// Required here, after the shim, by Node's own loader: the bundles (src/cli/bundle-write.ts) leave
// node-redis to Node, and would load a statically imported external before any module's code ran.
const { ErrorReply, RESP_TYPES, VerbatimString, createClient } = createRequire(import.meta.url)('redis') as typeof Redis;

export interface RedisStoreConfig {
  type: 'redis';
  /** `redis://[user:password@]host:port[/db]` or `rediss://...` (TLS). */
  url: string;
  /** Prepended to every key; lets several gateways (or other users) share one Redis database. */
  keyPrefix: string;
  /** One TCP (and TLS) connection attempt. */
  connectTimeoutMs: number;
  /** One command, from the call to the reply. */
  commandTimeoutMs: number;
  /** Failed connection attempts after which the store counts as settled (down) for readiness; it keeps retrying. */
  connectAttempts: number;
  /** Consecutive failed commands that open the breaker. */
  breakerFailures: number;
  /** How long the open breaker fails fast before one probe command. */
  breakerResetMs: number;
}

export interface RedisStoreOptions extends Omit<RedisStoreConfig, 'type'> {
  /** The store's name in `kvStores`. */
  name: string;
  /** Tests only: the caller's clock for rate limits instead of Redis TIME (see README: time source). */
  clock?: () => number;
}

/** The scripts loaded at every (re)connection. */
const SCRIPTS = [GCRA_TAKE_LUA, GCRA_TAKE_EACH_LUA, GET_IN_GROUP_LUA, SET_IN_GROUP_LUA, DELETE_GROUP_LUA];

/** Single takes of one bucket decided in one script call, at most. */
const MAX_TAKES_PER_CALL = 256;

interface QueuedTake {
  readonly policy: GcraPolicy;
  readonly deadline: number;
  resolve(decision: RateDecision): void;
  reject(error: unknown): void;
}

/** The single takes of one bucket: one call in flight at a time, the others waiting for the next. */
interface TakeQueue {
  busy: boolean;
  waiting: QueuedTake[];
}

export type RedisStoreStateName = 'connecting' | 'ready' | 'failing' | 'down';

export interface RedisStoreState {
  state: RedisStoreStateName;
  breaker: StoreBreakerState;
  /** The last failure, or null. */
  lastError: string | null;
  /** Why the state is not `ready` (what made it down, the error reply it fails with); null when ready. */
  reason: string | null;
}

export interface RedisStoreStats {
  /** Commands sent to Redis. */
  commands: number;
  /** Of those, the store's own probes while down or failing (see probe()). */
  probes: number;
  /** Commands that failed: connection lost, server error reply. */
  errors: number;
  /** Of those, error replies (READONLY, OOM, ...): Redis answered, and refused. */
  errorReplies: number;
  /** Commands without an answer within their timeout. */
  timeouts: number;
  /** Calls refused without touching the network: breaker open, or not connected. */
  failedFast: number;
  breakerOpens: number;
}

/** The key the store's own probes use (never a key of a middleware: theirs all contain `|`). */
const PROBE_KEY = '~probe';

/** What an error reply to a command says about the store: writes (scripts included) or reads refused. */
type ReplyKind = 'write' | 'read';

function replyKind(command: string | Buffer | undefined): ReplyKind | null {
  switch (command) {
    case 'EVALSHA':
    case 'EVAL':
    case 'SET':
    case 'DEL':
      return 'write';
    case 'GET':
      return 'read';
    default:
      return null;
  }
}

/** Reconnect delay: 50 ms doubling to at most 1 s, forever (the breaker keeps callers from waiting on it). */
function reconnectDelay(retries: number): number {
  return Math.min(50 * 2 ** Math.min(retries, 10), 1000);
}

const BUFFER_REPLIES = { [RESP_TYPES.BLOB_STRING]: Buffer } as const;

if (!shimInEffect(VerbatimString)) {
  process.emitWarning(
    "node-redis's VerbatimString extends String here (its module moved, or redis was loaded before the store): " +
      'on Node 20 that makes string method calls slower in this whole process (src/stores/verbatim-string-shim.ts)',
    'RedisClientWarning',
  );
}

export class RedisStore implements RateLimitStore, KeyValueStore {
  /** Every command settles by its deadline (run()). */
  readonly boundsWait = true;
  readonly name: string;
  private readonly client: ReturnType<typeof createClient>;
  private readonly keyPrefix: string;
  private readonly commandTimeoutMs: number;
  private readonly breaker: StoreBreaker;
  private readonly clock: (() => number) | undefined;
  private lastError: string | null = null;
  /** The connection's last error; null while connected. */
  private connectionError: string | null = null;
  /** The failure that last opened the breaker. */
  private breakerReason: string | null = null;
  /** Error replies in a row to each kind of command, and the last one's text: `failing` from failingAfter on. */
  private readonly replyErrors: Record<ReplyKind, { inARow: number; text: string }> = { write: { inARow: 0, text: '' }, read: { inARow: 0, text: '' } };
  private readonly failingAfter: number;
  private readonly probeTimer: NodeJS.Timeout;
  private probing = false;
  private readonly connectAttempts: number;
  /** Until the first answer: connection attempts that failed, and first commands that got no answer. */
  private failedAttempts = 0;
  private answered = false;
  private attemptsSpent = false;
  private closed = false;
  private settle!: () => void;
  private readonly settledPromise = new Promise<void>((resolve) => {
    this.settle = resolve;
  });
  private readonly counters = { commands: 0, probes: 0, errors: 0, errorReplies: 0, timeouts: 0, failedFast: 0 };
  private readonly takeQueues = new Map<string, TakeQueue>();
  /** The last key given to take and its bucket's Redis key (see bucketOf). */
  private lastKey: string | null = null;
  private lastBucket = '';

  constructor(options: RedisStoreOptions) {
    this.name = options.name;
    this.keyPrefix = options.keyPrefix;
    this.commandTimeoutMs = options.commandTimeoutMs;
    this.clock = options.clock;
    this.connectAttempts = options.connectAttempts;
    this.breaker = new StoreBreaker(options.breakerFailures, options.breakerResetMs);
    this.failingAfter = options.breakerFailures;
    this.client = createClient({
      url: options.url,
      disableOfflineQueue: true,
      // One less round trip in the handshake, which has no timeout of its own.
      disableClientInfo: true,
      socket: {
        connectTimeout: options.connectTimeoutMs,
        reconnectStrategy: (retries: number, cause: Error) => {
          this.connectionFailed(cause);
          this.attemptFailed();
          return reconnectDelay(retries);
        },
      },
    });
    // node-redis emits every connection failure as 'error'; it is recorded, not thrown.
    this.client.on('error', (error: Error) => this.connectionFailed(error));
    this.client.on('ready', () => {
      this.connectionError = null;
      this.loadScript();
    });
    this.client.connect().catch((error: Error) => this.connectionFailed(error));
    // A server that accepts connections but never answers stalls node-redis's handshake, which neither
    // fails nor times out: readiness must not wait on it for ever.
    const settleWithinMs = this.connectAttempts * (options.connectTimeoutMs + options.commandTimeoutMs) + 1000;
    setTimeout(() => {
      if (this.answered || this.attemptsSpent) return;
      this.attemptsSpent = true;
      this.lastError ??= `no answer within ${settleWithinMs} ms`;
      this.settle();
    }, settleWithinMs).unref();
    // Nothing else would call Redis on a quiet gateway: without probes a store stays down (or failing)
    // after Redis is fine again, until traffic comes.
    this.probeTimer = setInterval(() => this.probe(), Math.max(50, Math.min(options.breakerResetMs, 1000)));
    this.probeTimer.unref();
  }

  /**
   * Resolves once Redis answered a command, or once `connectAttempts` attempts failed (a connection
   * refused or timed out, or a first command unanswered), or at the latest after
   * connectAttempts × (connectTimeoutMs + commandTimeoutMs) + 1 s (a server that accepts but never answers).
   */
  settled(): Promise<void> {
    return this.settledPromise;
  }

  /**
   * `connecting` until the first answer (or its attempts are spent: `down`); then `down` while not
   * connected or the breaker is not closed, `failing` while Redis refuses every write (or every read)
   * with an error reply, else `ready`.
   */
  state(): RedisStoreState {
    const breaker = this.breaker.state;
    let state: RedisStoreStateName = 'down';
    let reason: string | null;
    if (this.closed) reason = 'closed';
    else if (!this.answered) {
      if (!this.attemptsSpent) state = 'connecting';
      reason = this.connectionError ?? this.lastError;
    } else if (!this.client.isReady) reason = this.connectionError ?? 'not connected';
    else if (breaker !== 'closed') reason = this.breakerReason ?? this.lastError;
    else if ((reason = this.failingReply()) !== null) state = 'failing';
    else state = 'ready';
    return { state, breaker, lastError: this.lastError, reason };
  }

  stats(): RedisStoreStats {
    return { ...this.counters, breakerOpens: this.breaker.opens };
  }

  /**
   * Takes `n` tokens (default 1, at most policy.limit) of `key`'s bucket, atomically for every gateway
   * on this Redis. Rejects with a StoreError; never waits longer than min(commandTimeoutMs, maxWaitMs)
   * in all, however many round trips.
   */
  take(key: string, policy: GcraPolicy, maxWaitMs = Infinity, n = 1): Promise<RateDecision> {
    if (!Number.isInteger(n) || n < 1 || n > policy.limit) return Promise.reject(new RangeError(`take: n must be an integer 1..${policy.limit}, got ${n}`));
    const deadline = Date.now() + Math.min(this.commandTimeoutMs, maxWaitMs);
    const bucket = this.bucketOf(key);
    // Not an async function: a single take (every request of a rate limit) returns takeOne's promise
    // itself, without a wrapping promise and the microtask hops of resolving one with another.
    return n === 1 ? this.takeOne(bucket, policy, deadline) : this.takeMany(bucket, policy, n, deadline);
  }

  /** The Redis key of a bucket; a client's consecutive takes reuse the string (its hash computed once). */
  private bucketOf(key: string): string {
    if (key !== this.lastKey) {
      this.lastKey = key;
      this.lastBucket = `${this.keyPrefix}rl:${digestKey(key)}`;
    }
    return this.lastBucket;
  }

  private async takeMany(bucket: string, policy: GcraPolicy, n: number, deadline: number): Promise<RateDecision> {
    const args = [String(policy.limit), String(policy.windowMs), String(n), this.clock === undefined ? '' : String(this.clock())];
    const reply = await this.runScript(GCRA_TAKE_SHA1, GCRA_TAKE_LUA, bucket, args, deadline);
    if (!Array.isArray(reply) || reply.length !== 4) throw new StoreError(this.name, 'server-error', `unexpected reply to the rate-limit script: ${String(reply)}`);
    return { admitted: reply[0] === 1, remaining: Number(reply[1]), resetMs: Number(reply[2]), retryAfterMs: Number(reply[3]) };
  }

  /**
   * A single take, coalesced: the first take of a bucket goes at once; those that arrive while its
   * call is out wait and go together in the next call (GCRA_TAKE_EACH_LUA), decided in arrival order
   * exactly as one call each would decide them. Under load a bucket costs one round trip per round
   * trip time instead of one per request; a lone request waits for nobody.
   */
  private takeOne(bucket: string, policy: GcraPolicy, deadline: number): Promise<RateDecision> {
    let queue = this.takeQueues.get(bucket);
    if (queue === undefined) {
      queue = { busy: false, waiting: [] };
      this.takeQueues.set(bucket, queue);
    }
    const waiting = queue;
    return new Promise<RateDecision>((resolve, reject) => {
      waiting.waiting.push({ policy, deadline, resolve, reject });
      if (!waiting.busy) this.sendTakes(bucket, waiting);
    });
  }

  private sendTakes(bucket: string, queue: TakeQueue): void {
    const now = Date.now();
    const waiting = queue.waiting;
    const batch: QueuedTake[] = [];
    let deadline = Infinity;
    let taken = 0;
    for (; taken < waiting.length && batch.length < MAX_TAKES_PER_CALL; taken++) {
      const take = waiting[taken]!;
      if (take.deadline <= now) {
        // Its budget went by while it waited for the call before: no time left for one of its own.
        this.counters.failedFast++;
        take.reject(new StoreError(this.name, 'timeout', 'no time left for the command'));
        continue;
      }
      // One call decides one policy (a reload may change it while takes of the old one wait).
      if (batch.length > 0 && !samePolicy(take.policy, batch[0]!.policy)) break;
      batch.push(take);
      deadline = Math.min(deadline, take.deadline);
    }
    waiting.splice(0, taken);
    if (batch.length === 0) {
      this.takeQueues.delete(bucket);
      return;
    }
    queue.busy = true;
    this.takeEach(bucket, batch[0]!.policy, batch.length, deadline).then(
      (decisions) => {
        for (let i = 0; i < batch.length; i++) batch[i]!.resolve(decisions[i]!);
      },
      (error: unknown) => {
        for (const take of batch) take.reject(error);
      },
    ).finally(() => {
      queue.busy = false;
      if (queue.waiting.length > 0) this.sendTakes(bucket, queue);
      else this.takeQueues.delete(bucket);
    });
  }

  /** `count` single takes of one bucket in one call; their decisions in order. */
  private async takeEach(bucket: string, policy: GcraPolicy, count: number, deadline: number): Promise<RateDecision[]> {
    const args = [String(policy.limit), String(policy.windowMs), String(count), this.clock === undefined ? '' : String(this.clock())];
    const reply = await this.runScript(GCRA_TAKE_EACH_SHA1, GCRA_TAKE_EACH_LUA, bucket, args, deadline);
    const admitted = Array.isArray(reply) ? Number(reply[0]) : NaN;
    if (!Array.isArray(reply) || !(admitted >= 0 && admitted <= count) || reply.length !== 1 + 2 * admitted + 3) {
      throw new StoreError(this.name, 'server-error', `unexpected reply to the rate-limit script: ${String(reply)}`);
    }
    const decisions: RateDecision[] = [];
    for (let i = 0; i < admitted; i++) {
      decisions.push({ admitted: true, remaining: Number(reply[1 + 2 * i]), resetMs: Number(reply[2 + 2 * i]), retryAfterMs: 0 });
    }
    const at = 1 + 2 * admitted;
    for (let i = admitted; i < count; i++) {
      decisions.push({ admitted: false, remaining: Number(reply[at]), resetMs: Number(reply[at + 1]), retryAfterMs: Number(reply[at + 2]) });
    }
    return decisions;
  }

  /** A script by its SHA1; the script itself when the server lost its script cache (restart, SCRIPT FLUSH), within the same budget. */
  private async runScript(sha1: string, lua: string, keys: string | readonly string[], args: ReadonlyArray<string | Buffer>, deadline: number, typeMapping?: typeof BUFFER_REPLIES): Promise<unknown> {
    const named = typeof keys === 'string' ? ['1', keys] : [String(keys.length), ...keys];
    try {
      return await this.run(['EVALSHA', sha1, ...named, ...args], deadline, typeMapping);
    } catch (error) {
      if (!(error instanceof StoreError && error.cause instanceof ErrorReply && error.cause.message.startsWith('NOSCRIPT'))) throw error;
      return this.run(['EVAL', lua, ...named, ...args], deadline, typeMapping);
    }
  }

  /** The value stored under `key`, or null. */
  async get(key: string, maxWaitMs = Infinity): Promise<Buffer | null> {
    const reply = await this.run(['GET', this.valueKey(key)], Date.now() + Math.min(this.commandTimeoutMs, maxWaitMs), BUFFER_REPLIES);
    return reply === null ? null : (reply as Buffer);
  }

  /** Stores `value` under `key` for `ttlMs` (a whole number of ms >= 1). The caller bounds the value's size. */
  async set(key: string, value: Buffer, ttlMs: number, maxWaitMs = Infinity): Promise<void> {
    if (!Number.isInteger(ttlMs) || ttlMs < 1) throw new RangeError(`set: ttlMs must be an integer >= 1, got ${ttlMs}`);
    await this.run(['SET', this.valueKey(key), value, 'PX', String(ttlMs)], Date.now() + Math.min(this.commandTimeoutMs, maxWaitMs));
  }

  /** set(), with `key` filed under `group`; with `generation`, only if the group was not deleted since (src/stores/redis-groups.ts). */
  async setInGroup(key: string, group: string, value: Buffer, ttlMs: number, maxWaitMs = Infinity, generation?: number): Promise<boolean> {
    if (!Number.isInteger(ttlMs) || ttlMs < 1) throw new RangeError(`setInGroup: ttlMs must be an integer >= 1, got ${ttlMs}`);
    const deadline = Date.now() + Math.min(this.commandTimeoutMs, maxWaitMs);
    const keys = [this.valueKey(key), this.groupKey(group), this.generationsKey()];
    const args = [value, String(ttlMs), String(groupSlot(group)), generation === undefined ? '' : String(generation)];
    return Number(await this.runScript(SET_IN_GROUP_SHA1, SET_IN_GROUP_LUA, keys, args, deadline)) === 1;
  }

  /** Removes every key filed under `group`, and the group, and moves its generation on; how many keys were filed. */
  async deleteGroup(group: string, maxWaitMs = Infinity): Promise<number> {
    const deadline = Date.now() + Math.min(this.commandTimeoutMs, maxWaitMs);
    return Number(await this.runScript(DELETE_GROUP_SHA1, DELETE_GROUP_LUA, [this.groupKey(group), this.generationsKey()], [String(groupSlot(group))], deadline));
  }

  /** get() of a key still filed under `group` (null otherwise), with the generation of `group` read in the same script. */
  async getInGroup(key: string, group: string, maxWaitMs = Infinity): Promise<GroupRead> {
    const deadline = Date.now() + Math.min(this.commandTimeoutMs, maxWaitMs);
    const keys = [this.valueKey(key), this.groupKey(group), this.generationsKey()];
    const reply = (await this.runScript(GET_IN_GROUP_SHA1, GET_IN_GROUP_LUA, keys, [String(groupSlot(group))], deadline, BUFFER_REPLIES)) as [Buffer | null, Buffer, Buffer];
    return { value: reply[0], generation: Number(reply[1].toString('latin1')) + Number(reply[2].toString('latin1')) };
  }

  /** Removes `key`; true when it was there. */
  async delete(key: string, maxWaitMs = Infinity): Promise<boolean> {
    const reply = await this.run(['DEL', this.valueKey(key)], Date.now() + Math.min(this.commandTimeoutMs, maxWaitMs));
    return reply === 1;
  }

  /** Closes the connection; later calls fail with StoreError `closed`. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.probeTimer);
    this.settle();
    try {
      this.client.destroy();
    } catch {
      // already closed
    }
  }

  private valueKey(key: string): string {
    return `${this.keyPrefix}kv:${boundKey(key)}`;
  }

  private groupKey(group: string): string {
    return `${this.keyPrefix}kvg:${boundKey(group)}`;
  }

  /** The hash of every group's generation (redis-groups.ts). */
  private generationsKey(): string {
    return `${this.keyPrefix}kvgen`;
  }

  /**
   * Loads the scripts on every (re)connection, so EVALSHA rarely needs its fallback (a cache's first
   * invalidation paid two more round trips for it). The first answer
   * settles the store; until then a load that gets no answer counts as a failed attempt and is retried.
   */
  private loadScript(): void {
    const deadline = Date.now() + this.commandTimeoutMs;
    Promise.all(SCRIPTS.map((lua) => this.run(['SCRIPT', 'LOAD', lua], deadline))).then(
      () => {
        this.answered = true;
        this.settle();
      },
      () => {
        if (this.answered || this.closed) return;
        this.attemptFailed();
        setTimeout(() => {
          if (!this.answered && !this.closed && this.client.isReady) this.loadScript();
        }, reconnectDelay(this.failedAttempts)).unref();
      },
    );
  }

  private connectionFailed(error: Error): void {
    this.lastError = this.connectionError = `connection: ${error.message}`;
  }

  /** The error reply of the kind of command Redis keeps refusing, or null. */
  private failingReply(): string | null {
    const { write, read } = this.replyErrors;
    if (write.inARow >= this.failingAfter) return write.text;
    if (read.inARow >= this.failingAfter) return read.text;
    return null;
  }

  /**
   * One command when the store is not ready though connected: a PING once the open breaker is due
   * for its probe, or the kind of command Redis refuses (a take of the probe key's bucket, or a GET)
   * while failing. Its outcome updates the state like any command's.
   */
  private probe(): void {
    if (this.closed || this.probing || !this.answered || !this.client.isReady) return;
    const deadline = Date.now() + this.commandTimeoutMs;
    let sent: Promise<unknown>;
    if (this.breaker.probeDue()) sent = this.run(['PING'], deadline);
    else if (this.breaker.state !== 'closed') return;
    else if (this.replyErrors.write.inARow >= this.failingAfter) {
      const args = ['1', '1000', '1', this.clock === undefined ? '' : String(this.clock())];
      sent = this.runScript(GCRA_TAKE_SHA1, GCRA_TAKE_LUA, `${this.keyPrefix}rl:${PROBE_KEY}`, args, deadline);
    } else if (this.replyErrors.read.inARow >= this.failingAfter) sent = this.run(['GET', this.valueKey(PROBE_KEY)], deadline);
    else return;
    this.counters.probes++;
    this.probing = true;
    sent.then(
      () => (this.probing = false),
      () => (this.probing = false),
    );
  }

  private attemptFailed(): void {
    if (this.answered || this.attemptsSpent) return;
    if (++this.failedAttempts >= this.connectAttempts) {
      this.attemptsSpent = true;
      this.settle();
    }
  }

  /**
   * Sends one command unless the breaker is open or there is no connection, and settles by `deadline`
   * (epoch ms) at the latest. Outcomes feed the breaker: a reply (even an error reply) shows Redis is
   * there; a timeout or a lost connection does not. Error replies feed `failing` instead.
   */
  private run(args: Array<string | Buffer>, deadline: number, typeMapping?: typeof BUFFER_REPLIES): Promise<unknown> {
    if (this.closed) return Promise.reject(new StoreError(this.name, 'closed', 'closed'));
    if (!this.breaker.permits()) {
      this.counters.failedFast++;
      return Promise.reject(new StoreError(this.name, 'breaker-open', `breaker open after repeated failures (last: ${this.lastError ?? 'none'})`));
    }
    if (!this.client.isReady) {
      this.counters.failedFast++;
      const why = this.connectionError ?? this.lastError;
      if (this.breaker.failed()) this.breakerReason = why ?? 'not connected';
      return Promise.reject(new StoreError(this.name, 'offline', `not connected${why === null ? '' : ` (${why})`}`));
    }
    const budget = deadline - Date.now();
    if (budget <= 0) {
      this.counters.failedFast++;
      return Promise.reject(new StoreError(this.name, 'timeout', 'no time left for the command'));
    }
    this.counters.commands++;
    return new Promise((resolve, reject) => {
      let done = false;
      const timer = setTimeout(() => {
        done = true;
        this.counters.timeouts++;
        this.lastError = `${args[0]} timed out after ${budget} ms`;
        if (this.breaker.failed()) this.breakerReason = this.lastError;
        reject(new StoreError(this.name, 'timeout', `no answer within ${budget} ms`));
      }, budget);
      this.client.sendCommand(args, typeMapping === undefined ? undefined : { typeMapping }).then(
        (reply) => {
          if (done) return;
          clearTimeout(timer);
          this.breaker.succeeded();
          const kind = replyKind(args[0]);
          if (kind !== null) this.replyErrors[kind].inARow = 0;
          resolve(reply);
        },
        (error: Error) => {
          if (done) return;
          clearTimeout(timer);
          const reply = error instanceof ErrorReply;
          const noScript = reply && error.message.startsWith('NOSCRIPT');
          if (!noScript) {
            this.counters.errors++;
            this.lastError = `${args[0]}: ${error.message}`;
          }
          if (reply) {
            this.breaker.succeeded();
            const kind = replyKind(args[0]);
            if (!noScript && kind !== null) {
              this.counters.errorReplies++;
              const errors = this.replyErrors[kind];
              errors.inARow++;
              errors.text = this.lastError!;
            }
          } else if (this.breaker.failed()) this.breakerReason = this.lastError;
          const code = reply ? 'server-error' : 'offline';
          reject(new StoreError(this.name, code, error.message, { cause: error }));
        },
      );
    });
  }
}

function samePolicy(a: GcraPolicy, b: GcraPolicy): boolean {
  return a === b || (a.limit === b.limit && a.windowMs === b.windowMs);
}
