/**
 * responseCache (docs/reference/response-cache.md): an RFC 9111 shared cache of GET answers, with HEAD served from the GET
 * entry; a HEAD the data plane forwards as GET is a GET here (it leads, follows and stores; its client
 * gets the head only). The rules are http-cache-semantics' plus our stricter ones (src/cache/rules.ts); keys and Vary
 * in src/cache/key.ts; stores in src/cache/store.ts.
 *
 * X-Cache on every answer of an endpoint it runs on: HIT (a fresh entry, with Age; also a 304 to a
 * client's matching conditional request, and a 206 to a single-range request), REVALIDATED (a stale
 * entry the upstream's 304 confirmed), UPDATING (stale-while-revalidate: served stale while one
 * background refresh runs), STALE (stale-if-error), MISS (went upstream), BYPASS (the cache took no
 * part, or the answer may not be stored). docs/cache.md says what each rule is and why.
 *
 * The hit path: one pass over the request headers, the key, a synchronous get from the store (the
 * instance's shared LMDB store: a lookup and a sequence-number compare), a clock read, and an answer
 * object built at most once per second per entry. Everything else (request directives, conditionals,
 * Range, an asynchronous store, a miss) goes through a CacheRequest.
 *
 * Coalescing: the first miss of a key leads, for the whole instance with the shared store (a lock
 * entry in it, see CacheRequest.missed); the others wait up to lockTimeoutMs for its entry (HIT), its
 * STALE entry when the upstream failed, or go upstream themselves at once when its answer was not
 * stored. With a kvStores store followers are per worker and wait at most slaMs.
 *
 * Counted under `middleware.<id>.`: hits, misses, stale, bypass (one of them per request),
 * bytesStored (the sum over the workers is what the instance holds), evictions, lockWaits,
 * waitTimeouts, backgroundRefreshes, revalidated304, revalidated200, notModified, invalidations,
 * storeErrors; errors (the pipeline's name) when the cache itself fails: the request then goes on
 * without it, as BYPASS. Both also give a warn line, at most one every 10 s (failure-log.ts).
 */
import type CachePolicy from 'http-cache-semantics';
import { Flights, type Flight, type FlightOutcome } from '../cache/flights.js';
import { credentialDigest, forwardingField, isKeyedForwardingField, isSensitiveHeader, primaryKey, requestOrigin, urlOfKey, urlPrefix, variantKey } from '../cache/key.js';
import { digestQueryParameters } from '../http/query-parameters.js';
import { invalidates, locationUrls } from '../cache/invalidation.js';
import { instanceCacheDir } from '../cache/instance-dir.js';
import { SharedCacheStore, type HeldLock, type Unchanged } from '../cache/shared-store.js';
import { PassMarks } from '../cache/pass-marks.js';
import { freshenedHeaders, selects } from '../cache/not-modified.js';
import { hasDirective, StoredResponse, VaryIndex, type CacheRecord } from '../cache/record.js';
import { fieldValue } from '../http/header-list.js';
import type { RouteTarget } from '../routing/types.js';
import { parseHttpDate } from '../cache/http-date.js';
import { judge, policyRequest, targetedValue, type Heuristic } from '../cache/rules.js';
import { CACHE_STORE, type CacheStore } from '../cache/store.js';
import { FailureLog } from '../cache/failure-log.js';
import type { RequestContext, ResponseObserver } from '../exchange/context.js';
import { SEND_AGAIN } from '../exchange/observer.js';
import { LongDecision, problem, type ContentAnswer, type Decision, type FetchedAnswer, type FetchUpstream, type Middleware, type MiddlewareContext, type MiddlewareMetrics } from './types.js';
import { counterPart } from '../metrics/counters.js';
import { MAX_LIFETIME_MS, MAX_TIMER_MS, timerDelay } from '../config/durations.js';
import type { EntryProblem } from '../config/typed-list-schema.js';

export interface ResponseCacheConfig {
  id: string;
  type: 'responseCache';
  slaMs: number;
  /** "local" or a kvStores name. */
  store: string;
  maxEntryBytes: number;
  maxBytes: number;
  defaultTtlMs: number;
  staleIfErrorMs: number;
  lockTimeoutMs?: number;
  heuristicFreshness?: boolean;
  heuristicMaxTtlMs?: number;
  targetedCacheControl?: string[];
  /**
   * Not in the config file: set by the primary (src/cluster/cache-epochs.ts) on a `local` cache whose id
   * came back after a config without it; its shared store then starts empty. 0 or absent: the id alone.
   */
  storeEpoch?: number;
}

export const responseCacheSchema = {
  description: 'A shared cache of GET answers by RFC 9111 rules (docs/reference/response-cache.md).',
  required: [],
  properties: {
    store: {
      type: 'string',
      minLength: 1,
      default: 'local',
      description:
        'Where entries are kept: "local" (one cache for the instance, shared by its workers through a memory-mapped file under the OS temporary directory, bounded by maxBytes) or the name of a kvStores entry (a redis store shares entries between instances; they expire there too).',
    },
    maxEntryBytes: {
      type: 'integer',
      minimum: 0,
      default: 131072,
      description: 'Largest body stored; a larger answer is streamed to the client and not stored.',
    },
    maxBytes: {
      type: 'integer',
      minimum: 1,
      default: 67108864,
      description:
        'Bytes the local store keeps for the whole instance (bodies, headers and about 512 bytes of bookkeeping per entry; every worker shares it); past it the oldest entries (by when they were stored) are evicted. Not smaller than maxEntryBytes.',
    },
    defaultTtlMs: {
      type: 'integer',
      minimum: 0,
      maximum: MAX_LIFETIME_MS,
      default: 0,
      description:
        'Lifetime given to a 200 that has no max-age, s-maxage or Expires (rounded up to whole seconds); 0: such answers are not stored.',
    },
    staleIfErrorMs: {
      type: 'integer',
      minimum: 0,
      maximum: MAX_LIFETIME_MS,
      default: 60000,
      description:
        'When the upstream fails (connection error, 5xx, timeout), an entry stale by less than this is served instead (X-Cache: STALE); never one marked must-revalidate. 0: never.',
    },
    heuristicFreshness: {
      type: 'boolean',
      default: false,
      description:
        'Store answers without explicit freshness but with Last-Modified for 10% of their age (RFC 9111 4.2.2), at most heuristicMaxTtlMs. Off: such answers are stored only under defaultTtlMs.',
    },
    targetedCacheControl: {
      type: 'array',
      items: { type: 'string', pattern: '^[!#$%&\'*+.^_`|~0-9A-Za-z-]+$' },
      default: ['CDN-Cache-Control'],
      description:
        'Response fields that, first present wins, replace Cache-Control for this cache (RFC 9213 targeted cache control). Clients of an endpoint the cache runs on never get them, from the cache or passed through.',
    },
    heuristicMaxTtlMs: {
      type: 'integer',
      minimum: 0,
      maximum: MAX_LIFETIME_MS,
      default: 86400000,
      description: 'The longest heuristic lifetime (heuristicFreshness).',
    },
    lockTimeoutMs: {
      type: 'integer',
      minimum: 0,
      maximum: MAX_TIMER_MS,
      default: 5000,
      description:
        'Longest a miss waits for the request of another (on any worker of the instance, with the local store) that is already fetching the same key; then it goes upstream itself. Independent of slaMs. With a kvStores store, followers wait at most slaMs.',
    },
  },
} as const;

/** Rules between the keys: with the local store, an entry must fit in maxBytes. */
export function responseCacheProblems(config: ResponseCacheConfig): EntryProblem[] {
  if (config.store !== 'local' || !(config.maxEntryBytes > config.maxBytes)) return [];
  return [{ key: 'maxEntryBytes', reason: `${config.maxEntryBytes} is larger than maxBytes (${config.maxBytes}); no entry that large could be kept in the local store` }];
}

/** Counter names, built once. */
class Names {
  readonly hits: string;
  readonly misses: string;
  readonly stale: string;
  readonly bypass: string;
  readonly bytesStored: string;
  readonly evictions: string;
  readonly waitTimeouts: string;
  readonly lockWaits: string;
  readonly storeErrors: string;
  readonly revalidated304: string;
  readonly revalidated200: string;
  readonly notModified: string;
  readonly invalidations: string;
  readonly backgroundRefreshes: string;
  readonly backgroundRefreshFailures: string;

  constructor(id: string) {
    const prefix = `middleware.${counterPart(id)}.`;
    this.hits = `${prefix}hits`;
    this.misses = `${prefix}misses`;
    this.stale = `${prefix}stale`;
    this.bypass = `${prefix}bypass`;
    this.bytesStored = `${prefix}bytesStored`;
    this.evictions = `${prefix}evictions`;
    this.waitTimeouts = `${prefix}waitTimeouts`;
    this.lockWaits = `${prefix}lockWaits`;
    this.revalidated304 = `${prefix}revalidated304`;
    this.revalidated200 = `${prefix}revalidated200`;
    this.notModified = `${prefix}notModified`;
    this.invalidations = `${prefix}invalidations`;
    this.backgroundRefreshes = `${prefix}backgroundRefreshes`;
    this.backgroundRefreshFailures = `${prefix}backgroundRefreshFailures`;
    this.storeErrors = `${prefix}storeErrors`;
  }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);

export class ResponseCache implements Middleware {
  readonly type = 'responseCache';
  readonly failClosed = false;
  readonly id: string;
  /** How long a store lookup may take. */
  readonly slaMs: number;
  readonly lockTimeoutMs: number;
  /** How long the pipeline waits for a miss that follows another request: lockTimeoutMs + slaMs, as a timer can wait. */
  private readonly longWaitMs: number;
  readonly maxEntryBytes: number;
  readonly defaultTtlMs: number;
  readonly staleIfErrorMs: number;
  readonly heuristic: Heuristic | null;
  /** Targeted Cache-Control field names, lower-case. */
  readonly targeted: readonly string[];
  /** The same, or null when there are none. */
  private readonly hidden: readonly string[] | null;
  readonly flights = new Flights();
  /** Keys whose last answer was not stored: their misses neither lead nor follow. */
  readonly passMarks = new PassMarks();
  /** Keys this worker refreshes in the background now. */
  private readonly refreshing = new Set<string>();
  /** The data plane's upstream client, for background refreshes (none before the pipeline is installed). */
  private fetchUpstream: FetchUpstream | null = null;
  /** A WebSocket upgrade is not for the cache: never served from it, never a leader or follower, never stored. */
  readonly decidesUpgrades = false;
  /** apiKeyAuth's query parameters, whose values the query part of a key holds as digests; null: none. */
  private secretQuery: readonly string[] | null = null;
  /** apiKeyAuth's headers (beyond Authorization, always digested), whose values the cache's view of a request holds as digests; null: none. */
  secretHeaders: readonly string[] | null = null;
  readonly names: Names;
  readonly metrics: MiddlewareMetrics;
  readonly store: CacheStore;
  /** The store when it is the instance's shared one (synchronous, with cross-worker locks). */
  readonly shared: SharedCacheStore | null;
  private readonly storeFailures: FailureLog;
  private readonly failures: FailureLog;

  constructor(config: ResponseCacheConfig, context: MiddlewareContext) {
    this.id = config.id;
    this.slaMs = config.slaMs;
    this.lockTimeoutMs = config.lockTimeoutMs ?? 5000;
    this.longWaitMs = timerDelay(this.lockTimeoutMs + config.slaMs);
    this.maxEntryBytes = config.maxEntryBytes;
    this.defaultTtlMs = config.defaultTtlMs;
    this.staleIfErrorMs = config.staleIfErrorMs;
    this.targeted = (config.targetedCacheControl ?? ['CDN-Cache-Control']).map((name) => name.toLowerCase());
    this.hidden = this.targeted.length === 0 ? null : this.targeted;
    this.heuristic = config.heuristicFreshness === true ? { maxMs: config.heuristicMaxTtlMs ?? 86_400_000 } : null;
    this.names = new Names(config.id);
    this.metrics = context.metrics;
    const warn = (message: string, fields?: Record<string, unknown>): void => context.warn(message, fields);
    this.storeFailures = new FailureLog(warn, `responseCache "${config.id}": its store failed; the request went on as if nothing were stored`, { middleware: config.id });
    this.failures = new FailureLog(warn, `responseCache "${config.id}" failed; the request went upstream without it (X-Cache: BYPASS)`, { middleware: config.id });
    this.store = this.openStore(config, context);
    this.shared = this.store instanceof SharedCacheStore ? this.store : null;
  }

  private openStore(config: ResponseCacheConfig, context: MiddlewareContext): CacheStore {
    const where = `middleware "${config.id}" (responseCache)`;
    if (config.store === 'local') {
      const [first] = responseCacheProblems(config);
      if (first !== undefined) throw new Error(`${where}: ${first.key}: ${first.reason}`);
      const { metrics, names } = this;
      const name = config.storeEpoch ? `${config.id}~${config.storeEpoch}` : config.id;
      return new SharedCacheStore(instanceCacheDir(), name, config.maxBytes, {
        added: (bytes) => metrics.add(names.bytesStored, bytes),
        removed: (bytes, evicted) => {
          metrics.add(names.bytesStored, -bytes);
          if (evicted) metrics.add(names.evictions);
        },
      });
    }
    const store = context.stores?.find(CACHE_STORE, config.store, config.id);
    if (store === undefined) {
      throw new Error(`${where}: store "${config.store}" is neither "local" nor the name of a kvStores entry`);
    }
    return store;
  }

  decide(ctx: RequestContext): Decision | Promise<Decision> | LongDecision {
    // Whatever reaches the client from the upstream (miss, bypass, uncacheable, the cache failing)
    // loses the fields this cache obeys (RFC 9213); answers built from entries never had them.
    if (this.hidden !== null) ctx.hideResponseHeaders(this.hidden);
    const method = ctx.method;
    if ((method !== 'GET' && method !== 'HEAD') || ctx.hasBody) return this.bypass(ctx);
    const headers = cacheView(ctx, this.secretHeaders);
    let directives = false;
    let authorization = false;
    let proto: string | undefined;
    let host: string | undefined;
    let extra = '';
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i]!;
      if (name === 'cache-control' || name === 'pragma' || name === 'if-none-match' || name === 'if-modified-since' || name === 'range') directives = true;
      else if (name === 'authorization') authorization = true;
      // Every line, joined as fieldValue() joins them: the upstream gets them all.
      else if (name === 'x-forwarded-host') host = host === undefined ? headers[i + 1] : `${host}, ${headers[i + 1]}`;
      else if (name === 'x-forwarded-proto') proto = proto === undefined ? headers[i + 1] : `${proto}, ${headers[i + 1]}`;
      else if (isKeyedForwardingField(name)) extra += forwardingField(name, headers[i + 1]!);
    }
    const key = primaryKey(requestOrigin(ctx.secure, proto, host, extra, ctx.route!.hostSet), keyedEndpoint(ctx), ctx.path, this.keyQuery(ctx.query));
    if (directives) return this.armed(new CacheRequest(this, ctx, key, authorization).start());
    const found = this.get(key);
    if (found !== undefined && !(found instanceof Promise)) {
      const entry = found.kind === 'response' ? found : this.get(variantKey(key, found.names, headers));
      if (entry instanceof StoredResponse && (!authorization || entry.sharedWithAuth)) {
        const now = Date.now();
        if (now < entry.freshUntil) {
          this.metrics.add(this.names.hits);
          return entry.answer('HIT', now);
        }
      }
    }
    return this.armed(new CacheRequest(this, ctx, key, authorization).resume(found));
  }

  /**
   * With the shared store a pending decision means one thing only: a miss waiting for another request's
   * answer, which may take lockTimeoutMs (a lookup never waits: the store answers synchronously). The
   * pipeline waits that long for it instead of slaMs.
   */
  private armed(decision: Decision | Promise<Decision>): Decision | Promise<Decision> | LongDecision {
    if (decision instanceof Promise && this.shared !== null) return new LongDecision(decision, this.longWaitMs);
    return decision;
  }

  /**
   * The cache threw while deciding for `ctx`, or its decision rejected (a bug, or a store failure where
   * it has no rule for one, such as taking a lock): the pipeline counted it (errors) and forwards the
   * request without the cache. Logged, labelled BYPASS (never the upstream's X-Cache), and a lead the
   * request took is given up, so its followers do not wait for it. Nothing here on the hit path.
   */
  failed(ctx: RequestContext, err: unknown): void {
    this.failures.report(err);
    const observers = ctx.observers;
    const request = observers?.find((observer): observer is CacheRequest => observer instanceof CacheRequest && observer.cache === this);
    if (request !== undefined) {
      request.abandon();
    } else {
      forwardedLabel(ctx, 'BYPASS');
      this.metrics.add(this.names.bypass);
    }
  }

  /** A store failure: counted in storeErrors and logged. */
  storeFailed(err: unknown): void {
    this.metrics.add(this.names.storeErrors);
    this.storeFailures.report(err);
  }

  /**
   * Another worker holds the lock on `key`: `flight` lands when its entry appears (stored: look again)
   * or its lock goes (released without storing, or expired), at the latest after lockTimeoutMs. Polls
   * the store (5 ms, growing to 50 ms): LMDB has no change notification across processes.
   */
  watchRemote(flight: Flight, key: string): void {
    const shared = this.shared!;
    const until = performance.now() + this.lockTimeoutMs;
    let interval = 5;
    const poll = (): void => {
      const found = this.get(key);
      if (found !== undefined && !(found instanceof Promise)) return flight.land({ stored: true, stale: null });
      let held = false;
      try {
        held = shared.locked(key);
      } catch (err) {
        this.storeFailed(err);
      }
      if (!held || performance.now() >= until) return flight.land({ stored: false, stale: null });
      interval = Math.min(50, interval * 1.5);
      setTimeout(poll, interval).unref();
    };
    setTimeout(poll, interval).unref();
  }

  private bypass(ctx: RequestContext): Decision {
    forwardedLabel(ctx, 'BYPASS');
    this.metrics.add(this.names.bypass);
    if (!SAFE_METHODS.has(ctx.method)) ctx.observe(new Invalidation(this, ctx));
    return undefined;
  }

  /** A store read that never throws or rejects (a failure reads as absent, and is counted). */
  get(key: string): CacheRecord | undefined | Promise<CacheRecord | undefined> {
    let found: CacheRecord | undefined | Promise<CacheRecord | undefined>;
    try {
      found = this.store.get(key);
    } catch (err) {
      this.storeFailed(err);
      return undefined;
    }
    if (found instanceof Promise) {
      return found.catch((err: unknown) => {
        this.storeFailed(err);
        return undefined;
      });
    }
    return found;
  }

  /**
   * Stores an answer (and its Vary index); `done` is a Promise when the store answers later. With
   * `generation` (generation() before the answer was fetched) nothing is stored if the URL was
   * invalidated since: `stored` is false then.
   */
  save(
    primary: string,
    requestHeaders: readonly string[],
    status: number,
    headers: readonly string[],
    body: Buffer,
    policy: CachePolicy,
    vary: readonly string[],
    lock: HeldLock | null = null,
    generation: number | null = null,
  ): { record: StoredResponse; done: void | Promise<void>; unlocked: boolean; stored: boolean | Promise<boolean> } {
    const now = Date.now();
    const targeted = this.targeted;
    const record = new StoredResponse(status, served(headers, targeted), body, policy, primary, now, targetedValue(headers, targeted));
    // Kept past its freshness for stale-if-error, stale-while-revalidate, and for revalidation when it has validators.
    const validators = record.etag !== undefined || record.lastModified !== undefined;
    const keep = Math.max(record.mustRevalidate ? 0 : Math.max(this.staleIfErrorMs, record.staleWhileRevalidateMs), validators ? REVALIDATE_KEEP_MS : 0);
    const ttl = Math.max(0, record.freshUntil - now) + keep;
    const unchanged = generation === null ? null : { url: urlOfKey(primary), generation };
    if (vary.length === 0) return { record, ...this.writeEntry(primary, record, ttl, lock, unchanged) };
    const key = variantKey(primary, vary, requestHeaders);
    // The variant before its index, and the lock with the last write: a follower on another worker
    // that sees the index looks up the variant next. Index first, it could find no variant there, take
    // the variant's key for a lead of its own and fetch the answer again (one upstream request more for
    // a herd of misses on a Vary'd URL, seen in test/cache/cache-long-keys.test.ts under load).
    const variant = this.writeEntry(key, record, ttl, null, unchanged);
    if (variant.stored === false) return { record, done: undefined, unlocked: false, stored: false };
    const index = this.writeEntry(primary, new VaryIndex(vary, now), ttl, lock, unchanged);
    const done = index.done instanceof Promise || variant.done instanceof Promise ? Promise.all([index.done, variant.done]).then(() => undefined) : undefined;
    const stored = index.stored instanceof Promise || variant.stored instanceof Promise ? Promise.all([index.stored, variant.stored]).then(([a, b]) => a && b) : index.stored;
    return { record, done, unlocked: index.unlocked, stored };
  }

  /**
   * A write of a save. With the shared store and a lock held, the lock goes in the same transaction
   * (SharedCacheStore.setAndUnlock); `unlocked` says whether it did. A failed write leaves the lock to
   * the caller's own unlock. With `unchanged`, the shared store checks the URL's generation in that
   * transaction: `stored` false, nothing written, when it moved. Another store that keeps generations
   * (a Redis one) checks in its own write (setIfUnchanged): `stored` is then a Promise, false also when
   * the write failed.
   */
  private writeEntry(key: string, record: CacheRecord, ttl: number, lock: HeldLock | null, unchanged: Unchanged | null): { done: void | Promise<void>; unlocked: boolean; stored: boolean | Promise<boolean> } {
    const shared = this.shared;
    if (shared === null && unchanged !== null && this.store.setIfUnchanged !== undefined) {
      const stored = this.setIfUnchanged(key, record, ttl, unchanged);
      return { done: stored instanceof Promise ? stored.then(() => undefined) : undefined, unlocked: false, stored };
    }
    if (shared === null || (lock === null && unchanged === null)) return { done: this.write(() => this.store.set(key, record, ttl)), unlocked: false, stored: true };
    let unlocked = false;
    let stored = true;
    const done = this.write(() => {
      stored = shared.setAndUnlock(key, record, ttl, lock, unchanged);
      unlocked = lock !== null;
    });
    return { done, unlocked, stored };
  }

  /** The store's setIfUnchanged, which never throws or rejects: a write that failed stored nothing. */
  private setIfUnchanged(key: string, record: CacheRecord, ttl: number, unchanged: Unchanged): boolean | Promise<boolean> {
    let stored: boolean | Promise<boolean>;
    try {
      stored = this.store.setIfUnchanged!(key, record, ttl, unchanged.url, unchanged.generation);
    } catch (err) {
      this.storeFailed(err);
      return false;
    }
    if (!(stored instanceof Promise)) return stored;
    return stored.catch((err: unknown) => {
      this.storeFailed(err);
      return false;
    });
  }

  /**
   * How many times the URL of `primary` was invalidated (the store's generation(): the shared store's
   * own count, or what a Redis store's last lookup of the URL read), read before its answer is
   * fetched; null when the store keeps no generations or cannot say.
   */
  generation(primary: string): number | null {
    const store = this.store;
    if (store.generation === undefined) return null;
    try {
      return store.generation(urlOfKey(primary)) ?? null;
    } catch (err) {
      this.storeFailed(err);
      return null;
    }
  }

  /**
   * stale-while-revalidate (RFC 5861): refreshes `entry` in the background, once per key for the
   * instance (the shared store's lock; per worker with another store). The request goes through the
   * data plane's upstream client (useUpstream) to the host the request's endpoint would be forwarded
   * to now, conditional when the entry has validators: a 304 that selects the entry (RFC 9111 4.3.4)
   * freshens it; one naming another representation leaves it as it is, and the refresh asks again
   * without conditions; a storable answer replaces it, unless it is a 5xx. Counted in
   * backgroundRefreshes; one that fails (no host, the call failed or ran past lockTimeoutMs, a 5xx) in
   * backgroundRefreshFailures, and the entry stays as it was.
   */
  refreshInBackground(key: string, primary: string, entry: StoredResponse, ctx: RequestContext, requestHeaders: readonly string[]): void {
    const fetch = this.fetchUpstream;
    if (fetch === null || this.refreshing.has(key)) return;
    const token = SharedCacheStore.newToken();
    if (this.shared !== null && !this.shared.tryLock(key, token, this.lockTimeoutMs)) return;
    this.refreshing.add(key);
    this.metrics.add(this.names.backgroundRefreshes);
    const conditions: string[] = [];
    if (entry.etag !== undefined) conditions.push('if-none-match', entry.etag);
    if (entry.lastModified !== undefined) conditions.push('if-modified-since', entry.lastModified);
    // What the upstream got for the request (ctx.headers), not the cache's view of it (cacheView puts
    // back an Authorization a middleware withheld). Host, the framing and hop-by-hop fields are the
    // upstream client's own: it drops a caller's copies.
    const sent = ctx.headers;
    const conditional: string[] = [];
    for (let i = 0; i < sent.length; i += 2) {
      const name = sent[i]!;
      // The entry's validators in place of the client's own.
      if (name !== 'if-none-match' && name !== 'if-modified-since') conditional.push(name, sent[i + 1]!);
    }
    conditional.push(...conditions);
    const generation = this.generation(primary);
    const target = ctx.query === '' ? ctx.path : `${ctx.path}?${ctx.query}`;
    const limits = { timeoutMs: this.lockTimeoutMs, maxBodyBytes: this.maxEntryBytes };
    const ask = (headers: readonly string[]): Promise<FetchedAnswer> => fetch(ctx, target, headers, limits) ?? Promise.reject(new Error('no host may take the refresh'));
    // The host is picked now, with the request's endpoint and breakers as they are.
    const first = ask(conditions.length > 0 ? conditional : sent);
    const finish = (): void => {
      this.refreshing.delete(key);
      if (this.shared !== null) void this.write(() => this.shared!.unlock(key, token));
    };
    void (async () => {
      let answer = await first;
      if (answer.status === 304 && selects(entry, answer.headers)) {
        const merged = freshenedHeaders(entry, answer.headers, this.targeted);
        const verdict = judge(primary, requestHeaders, entry.status, merged, this.defaultTtlMs, this.heuristic, Date.now(), this.targeted);
        if (verdict.policy !== null) await this.save(primary, requestHeaders, entry.status, merged, entry.body, verdict.policy, verdict.vary, null, generation).done;
        return;
      }
      if (answer.status === 304) {
        // It names another representation than the stored one (RFC 9111 4.3.4): that one is fetched whole.
        answer = await ask(sent);
        if (answer.status === 304) return;
      }
      // A 5xx is the upstream failing, as on a request (stale-if-error), whatever lifetime it carries:
      // stored, it would be served as a HIT in place of the good entry. A 4xx is an answer about the
      // resource (a 404 says it is gone) and is stored as a request's would be.
      if (answer.status >= 500) {
        this.metrics.add(this.names.backgroundRefreshFailures);
        return;
      }
      const verdict = judge(primary, requestHeaders, answer.status, answer.headers, this.defaultTtlMs, this.heuristic, Date.now(), this.targeted);
      if (verdict.policy !== null) {
        await this.save(primary, requestHeaders, answer.status, answer.headers, answer.body, verdict.policy, verdict.vary, null, generation).done;
      }
    })()
      .catch(() => this.metrics.add(this.names.backgroundRefreshFailures))
      .finally(finish);
  }

  useUpstream(fetch: FetchUpstream): void {
    this.fetchUpstream = fetch;
  }

  /**
   * An endpoint this cache is disabled for: a successful unsafe request there still changes the
   * resources whose answers it may hold (the same URL under another endpoint), so it invalidates them.
   */
  bystand(ctx: RequestContext): void {
    if (!SAFE_METHODS.has(ctx.method)) ctx.observe(new Invalidation(this, ctx));
  }

  useCredentials(query: readonly string[] | null, headers: readonly string[]): void {
    // Authorization (and the other credential fields) are digested by comparedValue() already.
    const own = headers.filter((name) => !isSensitiveHeader(name));
    this.secretQuery = query;
    this.secretHeaders = own.length === 0 ? null : own;
  }

  /**
   * A query as keys hold it: an API key left to the upstream (hideCredentials false) is part of what
   * the answer may depend on, so it stays in the key, as its digest (a remote store shows keys).
   */
  keyQuery(query: string): string {
    return this.secretQuery === null ? query : digestQueryParameters(query, this.secretQuery, credentialDigest);
  }

  /** A store write or delete that never throws or rejects; a Promise when the store answers later. */
  write(action: () => void | Promise<void>): void | Promise<void> {
    let done: void | Promise<void>;
    try {
      done = action();
    } catch (err) {
      this.storeFailed(err);
      return;
    }
    if (done instanceof Promise) return done.catch((err: unknown) => this.storeFailed(err));
  }

  ready(): Promise<void> {
    return this.store.ready();
  }

  close(): Promise<void> {
    return this.store.close();
  }
}

/**
 * An unsafe method's success (2xx, 3xx) invalidates its URL and the same-origin URLs of the answer's
 * Location and Content-Location (RFC 9111 4.4; src/cache/invalidation.ts), under every endpoint and in
 * every variant, for every worker (one range delete in the shared store). A store that cannot delete
 * by prefix (Redis) drops the target's primary key only.
 */
class Invalidation implements ResponseObserver {
  private readonly secure: boolean;
  private readonly path: string;
  private readonly query: string;
  private readonly canonical: string;
  private readonly hostSet: string;
  private readonly requestHeaders: readonly string[];

  constructor(
    private readonly cache: ResponseCache,
    ctx: RequestContext,
  ) {
    this.secure = ctx.secure;
    this.hostSet = ctx.route!.hostSet;
    this.path = ctx.path;
    this.query = ctx.query;
    // The URL is what is dropped (every endpoint and negotiated target under it); the endpoint only
    // names the key a store without prefixes deletes.
    this.canonical = keyedEndpoint(ctx);
    // Read at the answer: later middleware may change ctx.headers, but not X-Forwarded-*.
    this.requestHeaders = ctx.headers;
  }

  /**
   * The request's origin, which every URL it invalidates shares (locationUrls keeps same-origin ones
   * only), under its host set: the entries of another virtual host's upstreams are not its to drop.
   */
  private origin(): string {
    const headers = this.requestHeaders;
    let extra = '';
    for (let i = 0; i < headers.length; i += 2) if (isKeyedForwardingField(headers[i]!)) extra += forwardingField(headers[i]!, headers[i + 1]!);
    return requestOrigin(this.secure, fieldValue(headers, 'x-forwarded-proto'), fieldValue(headers, 'x-forwarded-host'), extra, this.hostSet);
  }

  onHead(status: number, headers: readonly string[]): void {
    if (!invalidates(status)) return;
    const cache = this.cache;
    const store = cache.store;
    cache.metrics.add(cache.names.invalidations);
    if (store.deletePrefix === undefined) {
      void cache.write(() => store.delete(primaryKey(this.origin(), this.canonical, this.path, cache.keyQuery(this.query))));
      return;
    }
    const drop = (prefix: string): void => {
      void cache.write(() => {
        const done = store.deletePrefix!(prefix);
        if (done instanceof Promise) return done.then(() => undefined);
      });
    };
    const origin = this.origin();
    drop(urlPrefix(origin, this.path, cache.keyQuery(this.query)));
    for (const url of locationUrls(this.secure, this.path, this.query, this.requestHeaders, headers)) {
      if (url.path === this.path && url.query === this.query) continue;
      cache.metrics.add(cache.names.invalidations);
      drop(urlPrefix(origin, url.path, cache.keyQuery(url.query)));
    }
  }
  onData(): void {}
  onEnd(): void {}
  onAbort(): void {}
  substitute(): ContentAnswer | null {
    return null;
  }
}

const enum Label {
  None,
  Hit,
  Miss,
  Bypass,
  Stale,
  Revalidated,
}

/**
 * One GET or HEAD that did not hit on the fast path: its lookup (Vary, request directives), its part
 * in coalescing, and, when forwarded, the observer that labels, copies and stores the upstream's answer.
 */
class CacheRequest implements ResponseObserver {
  /** The request headers as the cache saw them (later middleware may change ctx.headers). */
  private readonly requestHeaders: string[];
  private readonly deadline: number;
  private readonly isGet: boolean;
  /** A GET, or a HEAD the data plane forwards as GET (no HEAD endpoint): its upstream answer has the body to store. */
  private readonly fetchesGet: boolean;
  private hasDirectives = false;
  private noCache = false;
  private onlyIfCached = false;
  /** Where the lookup is: the primary key, or a variant's once a VaryIndex named the headers. */
  private lookupKey: string;
  private vary: readonly string[] = [];
  /** An entry that may stand in if the upstream fails (stale-if-error). */
  private candidate: StoredResponse | null = null;
  /** A stale entry whose validators went upstream in a conditional request (RFC 9111 4.3.1). */
  private revalidating: StoredResponse | null = null;
  /** The client's own request is conditional (If-None-Match / If-Modified-Since). */
  private conditional = false;
  private flight: Flight | null = null;
  /** This request leads for the instance: its token on the shared store's lock. */
  private lockToken: string | null = null;
  private observing = false;
  private label = Label.None;
  private served: ContentAnswer | null = null;
  private lastStored: StoredResponse | null = null;
  // The answer being copied for storing.
  private status = 0;
  private headers: readonly string[] = [];
  private policy: CachePolicy | null = null;
  private storedVary: readonly string[] = [];
  private chunks: Buffer[] | null = null;
  private bytes = 0;
  /** The cache failed while deciding for it (ResponseCache.failed): it takes no further part. */
  private abandoned = false;
  /** generation() of the URL when the request was last sent on its way upstream. */
  private generation: number | null = null;
  /** Its answer was not stored: the URL was invalidated while it was fetched. */
  private invalidated = false;

  constructor(
    readonly cache: ResponseCache,
    private readonly ctx: RequestContext,
    private readonly primary: string,
    private readonly authorization: boolean,
  ) {
    this.requestHeaders = cacheView(ctx, cache.secretHeaders).slice();
    this.conditional = fieldValue(this.requestHeaders, 'if-none-match') !== undefined || fieldValue(this.requestHeaders, 'if-modified-since') !== undefined;
    this.deadline = performance.now() + cache.slaMs;
    this.isGet = ctx.method === 'GET';
    this.fetchesGet = this.isGet || ctx.headAsGet;
    this.lookupKey = primary;
  }

  /** A request with Cache-Control or Pragma: its directives first. */
  start(): Decision | Promise<Decision> {
    this.hasDirectives = true;
    const cacheControl = fieldValue(this.requestHeaders, 'cache-control')?.toLowerCase();
    if (cacheControl !== undefined) {
      if (hasDirective(cacheControl, 'no-store')) {
        forwardedLabel(this.ctx, 'BYPASS');
        this.cache.metrics.add(this.cache.names.bypass);
        return undefined;
      }
      this.noCache = hasDirective(cacheControl, 'no-cache');
      this.onlyIfCached = hasDirective(cacheControl, 'only-if-cached');
    } else {
      // Pragma: no-cache counts only without Cache-Control (RFC 9111 5.4).
      this.noCache = hasDirective(fieldValue(this.requestHeaders, 'pragma')?.toLowerCase() ?? '', 'no-cache');
    }
    return this.resume(this.cache.get(this.primary));
  }

  resume(found: CacheRecord | undefined | Promise<CacheRecord | undefined>): Decision | Promise<Decision> {
    if (!(found instanceof Promise)) return this.resolved(found);
    // Watching from now on: if the pipeline gives up on the lookup at slaMs, the answer is still labelled.
    this.forward();
    return found.then((record) => this.resolved(record));
  }

  private resolved(record: CacheRecord | undefined): Decision | Promise<Decision> {
    if (record instanceof VaryIndex) {
      if (this.lookupKey !== this.primary) return this.missed();
      this.vary = record.names;
      this.lookupKey = variantKey(this.primary, record.names, this.requestHeaders);
      return this.resume(this.cache.get(this.lookupKey));
    }
    if (record !== undefined) {
      // Past the deadline the pipeline has moved on: the request is forwarded whatever is answered here.
      if (this.usable(record) && (this.cache.shared !== null || performance.now() < this.deadline)) {
        this.setLabel(Label.Hit);
        if (this.conditional && record.notModified(this.requestHeaders, parseHttpDate)) {
          this.cache.metrics.add(this.cache.names.notModified);
          return record.notModifiedAnswer(Date.now());
        }
        if (this.isGet) {
          const part = record.rangeAnswer(this.requestHeaders, Date.now());
          if (part !== null) return part;
        }
        return record.answer('HIT', Date.now());
      }
      if (!this.authorization || record.sharedWithAuth) {
        const now = Date.now();
        // stale-while-revalidate: served stale at once while one background refresh runs.
        const staleFor = now - record.freshUntil;
        if (this.isGet && !this.noCache && !this.conditional && !record.mustRevalidate && staleFor >= 0 && staleFor < record.staleWhileRevalidateMs) {
          this.cache.refreshInBackground(this.lookupKey, this.primary, record, this.ctx, this.requestHeaders);
          this.setLabel(Label.Stale);
          return record.answer('UPDATING', now);
        }
        if (!record.mustRevalidate) this.candidate = record;
        this.revalidate(record);
      }
    }
    return this.missed();
  }

  /**
   * A GET of a stale entry with validators: ask the upstream whether it changed, with the entry's
   * validators in place of any the client sent (its own are answered from the entry afterwards).
   */
  private revalidate(record: StoredResponse): void {
    if (!this.isGet || this.revalidating !== null) return;
    const etag = record.etag;
    const lastModified = record.lastModified;
    if (etag === undefined && lastModified === undefined) return;
    this.revalidating = record;
    const ctx = this.ctx;
    if (this.conditional) {
      ctx.removeRequestHeader('if-none-match');
      ctx.removeRequestHeader('if-modified-since');
    }
    if (etag !== undefined) ctx.headers.push('if-none-match', etag);
    if (lastModified !== undefined) ctx.headers.push('if-modified-since', lastModified);
  }

  /**
   * The upstream answered 304 to the entry's validators. One that selects the entry (RFC 9111 4.3.4)
   * freshens it; one that names another representation must not, and the request goes again without
   * conditions (SEND_AGAIN): its answer is served and stored like a miss's.
   */
  private notModified(headers: readonly string[]): ContentAnswer | typeof SEND_AGAIN {
    const entry = this.revalidating!;
    this.revalidating = null;
    if (selects(entry, headers)) return this.refreshed(entry, headers);
    this.ctx.removeRequestHeader('if-none-match');
    this.ctx.removeRequestHeader('if-modified-since');
    return SEND_AGAIN;
  }

  /**
   * The entry is fresh again with the 304's headers in place of its own (RFC 9111 4.3.4; framing
   * headers kept), stored, and served: whole, or as a 304 when the client's own conditions match it.
   */
  private refreshed(entry: StoredResponse, headers: readonly string[]): ContentAnswer {
    const merged = freshenedHeaders(entry, headers, this.cache.targeted);
    const verdict = judge(this.primary, this.requestHeaders, entry.status, merged, this.cache.defaultTtlMs, this.cache.heuristic, Date.now(), this.cache.targeted);
    const metrics = this.cache.metrics;
    metrics.add(this.cache.names.revalidated304);
    this.setLabel(Label.Revalidated);
    let record: StoredResponse;
    if (verdict.policy === null) {
      this.land(false);
      const targeted = targetedValue(merged, this.cache.targeted);
      record = new StoredResponse(entry.status, served(merged, this.cache.targeted), entry.body, entry.policy, entry.url, Date.now(), targeted);
    } else {
      this.status = entry.status;
      this.headers = merged;
      this.policy = verdict.policy;
      this.storedVary = verdict.vary;
      const stored = this.store(entry.body);
      if (stored instanceof Promise) void stored.then(() => this.land(true));
      else this.land(true);
      record = this.lastStored!;
    }
    if (this.conditional && record.notModified(this.requestHeaders, parseHttpDate)) {
      metrics.add(this.cache.names.notModified);
      return record.notModifiedAnswer(Date.now(), 'REVALIDATED');
    }
    return record.answer('REVALIDATED', Date.now());
  }

  private usable(record: StoredResponse): boolean {
    if (this.noCache || (this.authorization && !record.sharedWithAuth)) return false;
    const now = Date.now();
    if (!this.hasDirectives) return now < record.freshUntil;
    // Request directives (max-age, min-fresh, max-stale): the policy decides.
    const result = record.policy.evaluateRequest(policyRequest(record.url, this.requestHeaders, this.vary));
    if (result.response === undefined || result.revalidation !== undefined) return false;
    return now < record.freshUntil || !record.mustRevalidate;
  }

  private missed(): Decision | Promise<Decision> {
    if (this.onlyIfCached) {
      this.setLabel(Label.Miss);
      return problem(504, 'the request asks for a stored answer only (only-if-cached) and none is stored');
    }
    const cache = this.cache;
    const key = this.lookupKey;
    if (cache.passMarks.has(key, Date.now())) return this.forward();
    const flight = cache.flights.get(key);
    if (flight !== undefined) {
      if (!this.noCache && this.mayWait()) return this.follow(flight);
      return this.forward();
    }
    const shared = cache.shared;
    if (shared === null) {
      // A HEAD forwarded as HEAD has no body to store: it never leads.
      if (this.fetchesGet) this.flight = cache.flights.start(key);
      return this.forward();
    }
    // The shared store: the lead is taken for the whole instance (a lock entry in the store, with an
    // owner and an expiry, so a leader that dies holds it at most lockTimeoutMs; no message to the
    // primary, nothing to clean up when a worker goes). Followers on other workers watch the store.
    if (this.fetchesGet) {
      const token = SharedCacheStore.newToken();
      if (shared.tryLock(key, token, cache.lockTimeoutMs)) {
        // Another worker may have stored it and let go between the lookup and the lock.
        const again = cache.get(key);
        if (again instanceof StoredResponse && !this.noCache && this.usable(again)) {
          shared.unlock(key, token);
          this.setLabel(Label.Hit);
          return again.answer('HIT', Date.now());
        }
        this.lockToken = token;
        this.flight = cache.flights.start(key);
        return this.forward();
      }
    } else if (!shared.locked(key)) {
      return this.forward();
    }
    if (this.noCache) return this.forward();
    const remote = cache.flights.start(key);
    cache.watchRemote(remote, key);
    return this.follow(remote);
  }

  /** A follower may wait: with a synchronous store always (up to lockTimeoutMs), else within slaMs. */
  private mayWait(): boolean {
    return this.cache.shared !== null || performance.now() < this.deadline;
  }

  private follow(flight: Flight): Promise<Decision> {
    this.forward();
    this.cache.metrics.add(this.cache.names.lockWaits);
    const waitMs = this.cache.shared !== null ? this.cache.lockTimeoutMs : this.deadline - performance.now();
    return flight.wait(waitMs).then((outcome) => this.afterWait(outcome));
  }

  private afterWait(outcome: FlightOutcome | null): Decision | Promise<Decision> {
    if (outcome === null) {
      this.cache.metrics.add(this.cache.names.waitTimeouts);
      return this.forward();
    }
    if (outcome.stale !== null) {
      this.setLabel(Label.Stale);
      return outcome.stale;
    }
    if (!outcome.stored) return this.forward();
    // Look again from the top: the leader may have stored a VaryIndex and another variant.
    this.lookupKey = this.primary;
    this.vary = [];
    return this.resume(this.cache.get(this.primary));
  }

  /** The cache failed while deciding for this request: BYPASS, and no lead held, nothing stored or served. */
  abandon(): void {
    this.abandoned = true;
    this.chunks = null;
    // A label an answer would have carried (HIT, STALE) never reaches the client: say BYPASS.
    if (this.label === Label.None) this.setLabel(Label.Bypass);
    else if (this.label !== Label.Miss && this.label !== Label.Bypass) forwardedLabel(this.ctx, 'BYPASS');
    this.land(false);
  }

  private forward(): undefined {
    if (!this.observing) {
      this.observing = true;
      this.ctx.observe(this);
    }
    // Before it goes: an invalidation from now on means its answer may predate it (RFC 9111 4.4).
    if (this.fetchesGet) this.generation = this.cache.generation(this.primary);
    return undefined;
  }

  /** A MISS whose answer failed before the client had any of it: served stale after all. */
  private relabelStale(): void {
    this.chunks = null;
    const added = this.ctx.responseHeaders;
    if (added !== null) {
      for (let i = 0; i < added.length; i += 2) if (added[i] === 'x-cache' && added[i + 1] === 'MISS') added[i + 1] = 'STALE';
    }
    this.label = Label.Stale;
    this.cache.metrics.add(this.cache.names.stale);
  }

  private setLabel(label: Label): void {
    if (this.label !== Label.None) return;
    this.label = label;
    const { metrics, names } = this.cache;
    switch (label) {
      case Label.Hit:
        // The stored answer carries its own X-Cache.
        metrics.add(names.hits);
        break;
      case Label.Miss:
        forwardedLabel(this.ctx, 'MISS');
        metrics.add(names.misses);
        break;
      case Label.Bypass:
        forwardedLabel(this.ctx, 'BYPASS');
        metrics.add(names.bypass);
        break;
      case Label.Stale:
        // The stale answer carries its own X-Cache.
        metrics.add(names.stale);
        break;
      case Label.Revalidated:
        // Counted as a hit (revalidated304 says how); the answer carries its own X-Cache.
        metrics.add(names.hits);
        break;
    }
  }

  // ---- the upstream's answer (ResponseObserver) ----------------------------------------------

  onHead(status: number, headers: readonly string[]): void {
    if (this.abandoned) return;
    const verdict = judge(this.primary, this.requestHeaders, status, headers, this.cache.defaultTtlMs, this.cache.heuristic, Date.now(), this.cache.targeted);
    if (this.revalidating !== null && status === 200) this.cache.metrics.add(this.cache.names.revalidated200);
    this.setLabel(verdict.storable ? Label.Miss : Label.Bypass);
    if (this.fetchesGet) {
      // A 5xx says nothing about the resource, a 304 or 206 answers this request's own conditions.
      if (verdict.policy !== null) this.cache.passMarks.unmark(this.lookupKey);
      else if (status >= 200 && status < 500 && status !== 304 && status !== 206) this.cache.passMarks.mark(this.lookupKey, Date.now());
    }
    // Nothing will be stored: followers are released now, not when the body has passed.
    if (!this.fetchesGet || verdict.policy === null) return this.land(false);
    if (!this.isGet) {
      // A HEAD forwarded as GET: the body is read on for the entry after the client has its head,
      // unless it says it is too large to keep.
      const length = fieldValue(headers, 'content-length');
      if (length !== undefined && Number(length) > this.cache.maxEntryBytes) return this.land(false);
      this.ctx.observersWantBody = true;
    }
    this.status = status;
    this.headers = headers;
    this.policy = verdict.policy;
    this.storedVary = verdict.vary;
    this.chunks = [];
  }

  onData(chunk: Uint8Array): void {
    const chunks = this.chunks;
    if (chunks === null) return;
    this.bytes += chunk.byteLength;
    if (this.bytes > this.cache.maxEntryBytes) {
      this.chunks = null;
      // Behind a HEAD, the rest of a body that cannot be kept is not read.
      this.ctx.observersWantBody = false;
      return;
    }
    chunks.push(Buffer.from(chunk));
  }

  onEnd(): void {
    if (this.chunks === null) return this.land(false);
    const stored = this.store(Buffer.concat(this.chunks, this.bytes));
    this.chunks = null;
    if (stored instanceof Promise) void stored.then(() => this.land(true));
    else this.land(true);
  }

  onAbort(): void {
    this.chunks = null;
    // Forwarded and over before any answer (the client left, a later middleware answered).
    this.setLabel(Label.Miss);
    this.land(false);
  }

  substitute(status: number, headers?: readonly string[]): ContentAnswer | typeof SEND_AGAIN | null {
    if (this.abandoned) return null;
    if (status === 304) return this.revalidating === null ? null : this.notModified(headers ?? []);
    const candidate = this.candidate;
    const now = Date.now();
    if (candidate !== null && now - candidate.freshUntil < this.cache.staleIfErrorMs) {
      // The upstream failed after its head (labelled MISS then) and before any of its body went out.
      if (this.label === Label.Miss) this.relabelStale();
      this.setLabel(Label.Stale);
      this.served = candidate.answer('STALE', now);
      return this.served;
    }
    this.setLabel(Label.Miss);
    return null;
  }

  private land(stored: boolean): void {
    const token = this.lockToken;
    if (token !== null) {
      this.lockToken = null;
      void this.cache.write(() => this.cache.shared!.unlock(this.lookupKey, token));
    }
    const flight = this.flight;
    if (flight === null) return;
    this.flight = null;
    const outcome: FlightOutcome = { stored: stored && !this.invalidated, stale: this.served };
    flight.land(outcome);
  }

  /**
   * Keeps the answer (a Promise when the store answers later), unless its URL was invalidated since it
   * was sent upstream: then its followers go upstream themselves.
   */
  private store(body: Buffer): void | Promise<void> {
    const token = this.lockToken;
    const lock = token === null ? null : { key: this.lookupKey, token };
    const { record, done, unlocked, stored } = this.cache.save(this.primary, this.requestHeaders, this.status, this.headers, body, this.policy!, this.storedVary, lock, this.generation);
    // Let go with the entry (one commit): land() has no lock left to release.
    if (unlocked) this.lockToken = null;
    this.lastStored = record;
    if (stored === false) this.invalidated = true;
    else if (stored instanceof Promise) {
      return stored.then((kept) => {
        if (!kept) this.invalidated = true;
      });
    }
    return done;
  }
}


/** How long a stale entry with validators is kept for a conditional request. */
const REVALIDATE_KEEP_MS = 10 * 60_000;

/** Withheld from an answer the upstream gives, in favour of the cache's own. */
const X_CACHE: readonly string[] = ['x-cache'];

/**
 * The X-Cache of an answer the upstream gives (MISS, BYPASS, also when the cache failed): ours
 * replaces any the upstream sent. Answers built from entries carry their own, and entries are stored
 * without the upstream's (served()).
 */
function forwardedLabel(ctx: RequestContext, label: 'MISS' | 'BYPASS'): void {
  ctx.addResponseHeader('x-cache', label);
  ctx.hideResponseHeaders(X_CACHE);
}

/**
 * The headers an entry is served with: Age is the cache's to say, X-Cache this gateway's, Date the
 * server's (the origin's is read into the policy); targeted Cache-Control fields are this cache's.
 */
function served(headers: readonly string[], targeted: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    if (name !== 'age' && name !== 'x-cache' && name !== 'date' && !targeted.includes(name)) out.push(name, headers[i + 1]!);
  }
  return out;
}

/**
 * The request headers as the cache judges them: ctx.headers, with the client's Authorization put back
 * when a middleware before the cache withheld it (apiKeyAuth reading the key from it with
 * hideCredentials, or the pipeline's guard of hidden keys). RFC 9111 3.5 is about the request the
 * client sent: an answer to it is personal unless the upstream says otherwise, whatever goes upstream.
 * Only the cache reads this view; nothing of it is sent.
 */
function cacheView(ctx: RequestContext, secretHeaders: readonly string[] | null): string[] {
  const withheld = ctx.withheld;
  let headers = ctx.headers;
  if (secretHeaders !== null) headers = withDigests(headers, secretHeaders);
  if (withheld === null) return headers;
  const sent = fieldValue(withheld, 'authorization');
  if (sent === undefined) return headers;
  for (let i = 0; i < headers.length; i += 2) if (headers[i] === 'authorization') return headers;
  return [...headers, 'authorization', sent];
}

/**
 * `headers` with the values of `names` (apiKeyAuth's key headers) as their digests, for an upstream
 * that varies on its key (`Vary: X-Api-Key`): the variant key and the stored request view then hold
 * no key. The same list when it has none of them.
 */
function withDigests(headers: string[], names: readonly string[]): string[] {
  let out: string[] | null = null;
  for (let i = 0; i < headers.length; i += 2) {
    if (!names.includes(headers[i]!)) continue;
    out ??= headers.slice();
    out[i + 1] = credentialDigest(headers[i + 1]!);
  }
  return out ?? headers;
}

const negotiated = new WeakMap<readonly RouteTarget[], string>();

/**
 * The endpoint part of a key: the route's canonical template, and, when Content-Type / Accept
 * negotiation narrowed its targets (upstreams that produce different media types for one endpoint),
 * the upstreams it narrowed them to. The gateway chose the answer by the request's Accept there, and
 * no upstream can say so with Vary: without this, one client's XML would be served to the next one's
 * Accept: application/json. With virtual hosts, route.targets are those of the request's host set,
 * whose label the origin part holds: the two together name the upstreams that may have answered.
 */
function keyedEndpoint(ctx: RequestContext): string {
  const route = ctx.route!;
  const targets = ctx.targets;
  if (targets.length >= route.targets.length) return route.canonical;
  let names = negotiated.get(targets);
  if (names === undefined) {
    names = targets
      .map((target) => target.upstream)
      .sort()
      .join(',');
    negotiated.set(targets, names);
  }
  return `${route.canonical} ${names}`;
}

export function createResponseCache(config: ResponseCacheConfig, context: MiddlewareContext): Middleware {
  return new ResponseCache(config, context);
}
