/**
 * rateLimit (docs/reference/rate-limit.md): a GCRA bucket of `limit` requests per `windowMs` per key (the client
 * address, the consumer, or a header), per endpoint or across all endpoints, in a store: `local` (one
 * limit for the instance, leased to its workers by the primary) or a Redis store from kvStores (one
 * limit for every instance on it). See src/stores/README.md for how each keeps its accuracy.
 *
 * Every answer of an endpoint it runs on carries the IETF RateLimit fields (the draft's syntax, as
 * docs/reference/rate-limit.md#answers-and-headers writes them): `RateLimit-Policy: "<id>";q=<limit>;w=<window s>` and
 * `RateLimit: "<id>";r=<remaining>;t=<s until full>`, the latter only when the store answered (without
 * it the remaining quota is unknown). Over the limit: 429 with Retry-After.
 */
import type { RequestContext } from '../exchange/context.js';
import { gcraPolicy, gcraProductProblem, type GcraPolicy, type RateDecision } from '../stores/gcra.js';
import type { EntryProblem } from '../config/typed-list-schema.js';
import type { RateLimitStore } from '../stores/types.js';
import { StoreError } from '../stores/store-errors.js';
import type { StoreKind } from '../stores/lookup.js';
import { problem, type Decision, type Middleware, type MiddlewareContext } from './types.js';
import { counterPart } from '../metrics/counters.js';

export interface RateLimitConfig {
  id: string;
  type: 'rateLimit';
  slaMs: number;
  limit: number;
  windowMs: number;
  /** "ip", "consumer" or "header:<name>". */
  key: string;
  scope: 'endpoint' | 'global';
  store: string;
  onStoreError: 'allow' | 'deny';
}

export const rateLimitSchema = {
  description: 'Admits at most `limit` requests per `windowMs` per key (docs/reference/rate-limit.md).',
  required: ['limit', 'windowMs'],
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 10_000_000, description: 'Requests per window; also the largest burst admitted at once.' },
    windowMs: {
      type: 'integer',
      minimum: 1,
      maximum: 31 * 24 * 3600 * 1000,
      description: 'The window, in ms; after a burst, requests are admitted at limit / windowMs.',
    },
    key: {
      type: 'string',
      pattern: "^(ip|consumer|header:[!#$%&'*+.^_`|~0-9A-Za-z-]+)$",
      default: 'ip',
      description:
        'What a bucket belongs to: "ip" (the client address, per trustedProxies), "consumer" (the apiKeyAuth ' +
        'consumer, else the client address), or "header:<name>" (that request header\'s value, else the client address).',
    },
    scope: {
      type: 'string',
      enum: ['endpoint', 'global'],
      default: 'endpoint',
      description: '"endpoint": one bucket per key and endpoint (and set of upstreams, with virtual hosts); "global": one per key across every endpoint it runs on.',
    },
    store: {
      type: 'string',
      minLength: 1,
      default: 'local',
      description: '"local" (one limit for this instance, across its workers) or the name of a kvStores entry (one limit across the instances sharing it).',
    },
    onStoreError: {
      type: 'string',
      enum: ['allow', 'deny'],
      default: 'allow',
      description: 'When the store fails or does not answer within slaMs: "allow" admits the request, "deny" answers 503.',
    },
  },
} as const;

/**
 * Retry-After of the 503 when the store fails (onStoreError deny): a Redis store probes again after
 * breakerResetMs, 1 s by default, so a retry sooner would fail fast again.
 */
const STORE_ERROR_RETRY_AFTER = '1';
/** Characters of a store's error reply a 503 quotes. */
const MAX_REPLY_SHOWN = 200;

/** The kind of store a rateLimit names: `local` or a kvStores name. */
export const RATE_LIMIT_STORE: StoreKind<RateLimitStore> = Object.freeze({ kind: 'rateLimit' });

class RateLimit implements Middleware {
  readonly type = 'rateLimit';
  readonly failClosed = false;
  readonly id: string;
  readonly slaMs: number;
  private readonly policy: GcraPolicy;
  private readonly policyHeader: string;
  private readonly quotedId: string;
  private readonly header: string | null;
  private readonly byConsumer: boolean;
  private readonly global: boolean;
  private readonly deny: boolean;
  private readonly storeErrors: string;
  /**
   * A store call gives up a little before slaMs, so onStoreError (allow, or deny with 503) decides a
   * slow store, not the pipeline's SLA (which would always let the request through).
   */
  private readonly storeWaitMs: number;
  /** Key prefix per route (scope "endpoint"): built once per route, not per request (each host table has its own routes). */
  private readonly prefixes = new WeakMap<object, string>();
  private readonly globalPrefix: string;
  /** The last bucket key built and its parts (see bucketKey). */
  private lastKey = '';
  private lastPrefix = '';
  private lastTag = '';
  private lastSubject = '';
  /** The last error reply a 503 quoted, and its detail (a failing store refuses every request alike). */
  private lastReply = '';
  private lastReplyDetail = '';

  constructor(
    config: RateLimitConfig,
    private readonly store: RateLimitStore,
    private readonly settled: Promise<void>,
    private readonly context: MiddlewareContext,
  ) {
    this.id = config.id;
    this.slaMs = config.slaMs;
    this.policy = gcraPolicy(config.limit, config.windowMs);
    this.quotedId = `"${config.id}"`;
    this.policyHeader = `${this.quotedId};q=${config.limit};w=${Math.ceil(config.windowMs / 1000)}`;
    this.header = config.key.startsWith('header:') ? config.key.slice('header:'.length).toLowerCase() : null;
    this.byConsumer = config.key === 'consumer';
    this.global = config.scope === 'global';
    this.deny = config.onStoreError === 'deny';
    this.storeErrors = `middleware.${counterPart(config.id)}.storeErrors`;
    this.storeWaitMs = Math.max(1, Math.floor(config.slaMs * 0.9));
    this.globalPrefix = `${config.id}|*|`;
  }

  decide(ctx: RequestContext): Decision | Promise<Decision> {
    ctx.addResponseHeader('ratelimit-policy', this.policyHeader);
    let result: RateDecision | Promise<RateDecision>;
    try {
      result = this.store.take(this.bucketKey(ctx), this.policy, this.storeWaitMs);
    } catch (error) {
      return this.storeFailed(error);
    }
    if (result instanceof Promise) {
      const bounded = this.store.boundsWait === true ? result : this.bounded(result);
      return bounded.then((decision) => this.apply(ctx, decision), (error: unknown) => this.storeFailed(error));
    }
    return this.apply(ctx, result);
  }

  /**
   * A take from a store that does not bound its own wait (the local store: a lease request waits on
   * the primary), failed as a timeout at storeWaitMs, so that onStoreError decides it ("deny": 503),
   * not the pipeline's SLA, which lets it through. The take itself goes on and spends its token.
   */
  private bounded(pending: Promise<RateDecision>): Promise<RateDecision> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new StoreError(this.store.name, 'timeout', `no answer within ${this.storeWaitMs} ms`)), this.storeWaitMs);
      pending.then(
        (decision) => {
          clearTimeout(timer);
          resolve(decision);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  ready(): Promise<void> {
    return this.settled;
  }

  close(): Promise<void> {
    // The stores belong to the worker and outlive a reload's pipeline.
    return Promise.resolve();
  }

  private bucketKey(ctx: RequestContext): string {
    // Each kind of subject has its own tag, so that no value of one can name a bucket of another (a
    // header holding a client's address would otherwise spend that client's own bucket).
    let subject: string | undefined;
    let tag = 'ip:';
    if (this.header !== null) {
      // As the client sent it: an apiKeyAuth before this may have withheld the header from the upstream.
      subject = ctx.clientFieldValue(this.header);
      if (subject === '') subject = undefined;
      else if (subject !== undefined) tag = 'h:';
    } else if (this.byConsumer && ctx.consumer !== null) {
      subject = ctx.consumer;
      tag = 'c:';
    }
    subject ??= ctx.clientAddress;
    const prefix = this.prefixOf(ctx);
    // Consecutive requests mostly come from the same client: the same key object, whose hash the
    // store's Map has already computed, instead of a new string to build and hash.
    if (subject === this.lastSubject && tag === this.lastTag && prefix === this.lastPrefix) return this.lastKey;
    this.lastSubject = subject;
    this.lastTag = tag;
    this.lastPrefix = prefix;
    return (this.lastKey = prefix + tag + subject);
  }

  /**
   * With virtual hosts, per host set as well: the host tables keep the full table's route ids and
   * canonicals, and one host's clients must not spend another's per-endpoint quota.
   */
  private prefixOf(ctx: RequestContext): string {
    if (this.global) return this.globalPrefix;
    const route = ctx.route!;
    let prefix = this.prefixes.get(route);
    if (prefix === undefined) {
      const hostSet = route.hostSet === '' ? '' : `[${route.hostSet}]`;
      this.prefixes.set(route, (prefix = `${this.id}|${hostSet}${route.method} ${route.canonical}|`));
    }
    return prefix;
  }

  private apply(ctx: RequestContext, decision: RateDecision): Decision {
    ctx.addResponseHeader('ratelimit', `${this.quotedId};r=${decision.remaining};t=${Math.ceil(decision.resetMs / 1000)}`);
    if (decision.admitted) return undefined;
    const retryAfter = Math.max(1, Math.ceil(decision.retryAfterMs / 1000));
    return problem(429, `over the rate limit of ${this.id}; retry in ${retryAfter} s`, ['retry-after', String(retryAfter)]);
  }

  private storeFailed(error: unknown): Decision {
    this.context.metrics.add(this.storeErrors);
    if (!this.deny) return undefined;
    return problem(503, this.storeFailure(error), ['retry-after', STORE_ERROR_RETRY_AFTER]);
  }

  /** The 503's detail: what the store answered when it refused (an error reply), else that it did not answer. */
  private storeFailure(error: unknown): string {
    if (!(error instanceof StoreError && error.code === 'server-error')) return `the rate limit store of ${this.id} is not answering`;
    const reply = error.detail.length > MAX_REPLY_SHOWN ? `${error.detail.slice(0, MAX_REPLY_SHOWN)}...` : error.detail;
    if (reply !== this.lastReply) {
      this.lastReply = reply;
      this.lastReplyDetail = `the rate limit store of ${this.id} answers with errors: ${reply}`;
    }
    return this.lastReplyDetail;
  }
}

/** Rules between the keys: limit × windowMs must stay exact (the GCRA arithmetic, gcra.ts). */
export function rateLimitProblems(config: RateLimitConfig): EntryProblem[] {
  const product = gcraProductProblem(config.limit, config.windowMs);
  return product === null ? [] : [{ key: 'limit', reason: product }];
}

export function createRateLimit(config: RateLimitConfig, context: MiddlewareContext): Middleware {
  const store = context.stores?.find(RATE_LIMIT_STORE, config.store, config.id);
  if (store === undefined) {
    throw new Error(`middleware "${config.id}": store "${config.store}" is neither "local" nor the name of a kvStores entry`);
  }
  const settled = context.stores?.settled(config.store) ?? Promise.resolve();
  return new RateLimit(config, store, settled, context);
}
