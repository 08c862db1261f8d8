/**
 * What a middleware is to the pipeline (docs/reference/middleware.md). A type lives in a file of its own that
 * exports a MiddlewareType (its config schema and its factory); registry.ts lists the types.
 */
import type { RequestContext } from '../exchange/context.js';
import type { Answer } from '../exchange/answer.js';

export type { Answer, ContentAnswer, ProblemAnswer } from '../exchange/answer.js';
export { problem } from '../exchange/answer.js';

/** Answers the request itself instead of forwarding it; undefined lets it go on. */
export type Decision = Answer | undefined;

/**
 * A pending decision allowed to take longer than the middleware's slaMs: a cache miss waiting for the
 * request that already fetches the same key (lockTimeoutMs). The pipeline waits up to `waitMs` for it.
 */
export class LongDecision {
  constructor(
    readonly pending: Promise<Decision>,
    readonly waitMs: number,
  ) {}
}

/** Where an apiKeyAuth entry reads its key (lower-case header name, query parameter or null), and whether it hides it. */
export interface Credentials {
  readonly header: string;
  readonly query: string | null;
  readonly hide: boolean;
}

/** What FetchUpstream brings back: the status, the end-to-end headers (names lower-case) and the whole body. */
export interface FetchedAnswer {
  readonly status: number;
  readonly headers: readonly string[];
  readonly body: Buffer;
}

/**
 * A GET a middleware makes of its own, outside any client's request (the response cache's background
 * refresh), through the data plane's upstream client: to the host `ctx`'s endpoint would be forwarded
 * to now (balancer and breakers), over that host's connections, TLS settings and timeouts. One try.
 * `target` is the path and query. Null when no host may take it; rejects when the call fails, takes
 * longer than `timeoutMs` or brings a body larger than `maxBodyBytes`.
 */
export type FetchUpstream = (ctx: RequestContext, target: string, headers: readonly string[], limits: { timeoutMs: number; maxBodyBytes: number }) => Promise<FetchedAnswer> | null;

export interface Middleware {
  readonly id: string;
  readonly type: string;
  /** A decision that takes longer is skipped (or, failClosed, answered 503) and counted. */
  readonly slaMs: number;
  /** An SLA miss answers 503 instead of letting the request go on (apiKeyAuth). */
  readonly failClosed: boolean;
  /**
   * Decides for one routed request, before it is forwarded: synchronously when it can, else a Promise.
   * It may change `ctx.headers` (what the upstream gets), add `ctx.responseHeaders`, set `ctx.consumer`.
   * It must not throw or reject for a store failure (it applies its own onStoreError rule).
   */
  decide(ctx: RequestContext): Decision | Promise<Decision> | LongDecision;
  /**
   * Optional: decide threw for `ctx`, or its Promise rejected. The pipeline has counted it (errors) and
   * goes on without this middleware (or answers 503 when it fails closed); here the middleware may
   * label the request, log why and let go of what it held for it. Not called on any other path.
   */
  failed?(ctx: RequestContext, err: unknown): void;
  /**
   * False: nothing for this middleware to decide on a WebSocket upgrade, and it does not run for one
   * (the response cache: a 101 is not an answer to store or serve). Absent: it runs, as for a GET.
   */
  readonly decidesUpgrades?: boolean;
  /** apiKeyAuth: where it reads a key, and whether it hides it (the pipeline guards every routed request with them). */
  readonly credentials?: Credentials;
  /**
   * Optional: told of each request the pipeline admits on an endpoint this middleware is disabled for
   * (x-disabled-middleware), before it is forwarded; it must not answer or change the request. The
   * response cache invalidates what a successful unsafe request there changes (RFC 9111 4.4).
   */
  bystand?(ctx: RequestContext): void;
  /**
   * Optional: the pipeline hands over where its apiKeyAuth entries read keys, each name once: their
   * query parameters (null: none) and headers (lower-case). The response cache keeps them out of its keys.
   */
  useCredentials?(query: readonly string[] | null, headers: readonly string[]): void;
  /** Optional: the data plane that installs the pipeline hands over its FetchUpstream. */
  useUpstream?(fetch: FetchUpstream): void;
  /** Resolves once the middleware can decide as configured (its store answered, or its attempts ran out). */
  ready(): Promise<void>;
  /** Frees what it holds (store connections); in-flight decisions may still settle. */
  close(): Promise<void>;
}

/** Where middleware count what /metrics shows per middleware id (dotted counter names). */
export interface MiddlewareMetrics {
  add(name: string, n?: number): void;
}

import type { StoreLookup } from '../stores/lookup.js';

export type { StoreKind, StoreLookup } from '../stores/lookup.js';

export interface MiddlewareContext {
  metrics: MiddlewareMetrics;
  /** Writes a log line (warnings about stores, ...). */
  warn(message: string, fields?: Record<string, unknown>): void;
  /** The stores middleware may name; absent: only the cache's own `local` store exists. */
  stores?: StoreLookup;
}

/** The header an admitted request reaches the upstream with; a client's is never forwarded (Pipeline). */
export const CONSUMER_HEADER = 'x-consumer';
