/**
 * The upstream call's handler, composed the way undici composes its RetryHandler: each try at one host
 * is an Attempt (the pool's handler, with that try's state), and the RetryHandler around them decides,
 * on a failure, whether a new Attempt goes to another host of the endpoint (once, before any of the
 * answer reached the client, and only with a body it can send again: held whole, or streamed but none
 * of it sent yet) or the failure goes on to the ProxiedResponse. Breakers and failure counters are fed
 * per attempt.
 */
// The module binding, not the global: globalThis.performance is an accessor, read on every call.
import { performance } from 'node:perf_hooks';
import type { RequestContext } from '../exchange/context.js';
import type { UpstreamCall, UpstreamHandler } from '../upstream/call.js';
import type { UpstreamError } from '../upstream/call-errors.js';
import type { UpstreamPool } from '../upstream/pool.js';
import type { ResponseHead } from '../upstream/response-parser.js';
import { classifyUpstreamError, isIdempotent, type ForwardFailure } from '../proxy/forward-errors.js';
import type { BodySink, UpstreamLeg } from './legs.js';
import type { ProxiedResponse } from './proxied-response.js';

/** What the retry handler needs of the forward phase. */
export interface RetryHost {
  /** A host of this request's endpoint other than the one that failed, which may take it now; null when none. Counts the retry. */
  retryTarget(ctx: RequestContext, failure: ForwardFailure): string | null;
  poolFor(upstream: string): UpstreamPool;
  /** An attempt failed (counted for /metrics). */
  upstreamFailed(failure: ForwardFailure): void;
  /** An attempt's request went once more to its host on a fresh connection (its kept-alive one closed first). */
  upstreamResent(): void;
  /** The TLS handshake with `upstream` failed (logged). */
  tlsHandshakeFailed(upstream: string, err: UpstreamError): void;
  breakerSuccess(upstream: string, routeId: number): void;
  breakerFailure(upstream: string, routeId: number): void;
}

/** A request body the pump streams as it arrives, of a known length or (-1) chunked. */
const UNKNOWN_LENGTH = Object.freeze({ length: -1 });

export class RetryHandler implements UpstreamLeg, BodySink {
  /** The try under way; replaced by a retry. */
  private attempt: Attempt | null = null;
  private retried = false;
  private sentAgain = false;
  /** The body goes to the upstream as it arrives: once some of it was sent, it cannot be sent twice. */
  private streamed: { length: number } | null = null;
  /**
   * A streamed body's chunks so far, while no byte of the request has left (the call holds them until
   * it has a connection, PENDING_BODY_LIMIT at most): what a retry after a refused or timed-out connect
   * sends again. Null once the request went out.
   */
  private unsentChunks: Buffer[] | null = null;
  private unsentEnded = false;
  private body: Buffer | null = null;
  /** Called when a streamed body's writer may write more. */
  onBodyDrain: (() => void) | null = null;

  constructor(
    private readonly host: RetryHost,
    readonly response: ProxiedResponse,
    private readonly method: string,
    /** Path and query as forwarded. */
    private readonly target: string,
  ) {}

  /** Sends the request with its whole body (or none): it may be retried. */
  send(upstream: string, body: Buffer | null): void {
    this.body = body;
    this.attempt = new Attempt(this, upstream, this.host.poolFor(upstream), body);
  }

  /** Sends the request while its body still arrives (`length` -1: chunked): retried only while none of it left. */
  sendStreamed(upstream: string, length: number): void {
    this.streamed = length >= 0 ? { length } : UNKNOWN_LENGTH;
    this.unsentChunks = [];
    this.attempt = new Attempt(this, upstream, this.host.poolFor(upstream), this.streamed);
  }

  writeBody(chunk: Buffer): boolean {
    const call = this.attempt?.call;
    if (call === null || call === undefined) return true;
    this.keepUnsent(call, chunk);
    return call.writeBody(chunk);
  }

  endBody(): void {
    const call = this.attempt?.call;
    if (call === null || call === undefined) return;
    this.keepUnsent(call, null);
    call.endBody();
  }

  private keepUnsent(call: UpstreamCall, chunk: Buffer | null): void {
    if (this.unsentChunks === null) return;
    if (call.requestSent) {
      this.unsentChunks = null;
      return;
    }
    if (chunk === null) this.unsentEnded = true;
    else this.unsentChunks.push(chunk);
  }

  abort(): void {
    this.attempt?.stop();
  }

  resume(): void {
    this.attempt?.resume();
  }

  sendAgain(): boolean {
    const upstream = this.response.ctx.upstream;
    if (this.sentAgain || this.streamed !== null || upstream === null) return false;
    this.sentAgain = true;
    this.attempt?.stop();
    this.attempt = new Attempt(this, upstream, this.host.poolFor(upstream), this.body);
    return true;
  }

  // ---- from an attempt -------------------------------------------------------------------------

  /** `attempt` failed; answered here by a retry, else passed on. */
  failed(attempt: Attempt, failure: ForwardFailure): void {
    const ctx = this.response.ctx;
    this.host.upstreamFailed(failure);
    if (failure.upstreamFault) attempt.breakerFailure();
    if (this.mayRetry(failure)) {
      const next = this.host.retryTarget(ctx, failure);
      if (next !== null) {
        this.retried = true;
        ctx.status = 0;
        if (this.streamed === null) this.attempt = new Attempt(this, next, this.host.poolFor(next), this.body);
        else this.sendUnsentTo(next);
        return;
      }
    }
    this.response.failed(failure);
  }

  /** A streamed body none of which was sent: what arrived of it goes to `upstream`, the rest follows. */
  private sendUnsentTo(upstream: string): void {
    const chunks = this.unsentChunks!;
    // There is no second retry: nothing more needs keeping.
    this.unsentChunks = null;
    const attempt = (this.attempt = new Attempt(this, upstream, this.host.poolFor(upstream), this.streamed!));
    let writable = true;
    for (let i = 0; i < chunks.length && attempt.call !== null; i++) writable = attempt.call.writeBody(chunks[i]!);
    if (this.unsentEnded) attempt.call?.endBody();
    // The pump may be waiting for the failed call's drain; this call owes one only when it said wait.
    if (writable) attempt.onBodyDrain();
  }

  /**
   * The first try failed before anything could go to the host, for a reason of the request (a head
   * that cannot be written: bytes that are not UTF-8, a header value with CR/LF) or of the gateway
   * (shutting down): the request was not upstream traffic, no host is named and no time kept. After a
   * retry the earlier try stands: the request stays counted under the host tried last.
   */
  notSent(): void {
    if (this.retried) return;
    const ctx = this.response.ctx;
    ctx.upstream = null;
    ctx.upstreamSentAt = 0;
    ctx.upstreamStartedAt = 0;
    ctx.upstreamEndedAt = 0;
    ctx.upstreamMs = -1;
  }

  breakerSuccess(upstream: string): void {
    this.host.breakerSuccess(upstream, this.response.ctx.routeId);
  }

  tlsHandshakeFailed(upstream: string, err: UpstreamError): void {
    this.host.tlsHandshakeFailed(upstream, err);
  }

  /** The attempt's request went once more to its host on a fresh connection: counted, it reached the host twice. */
  resent(): void {
    this.host.upstreamResent();
  }

  breakerFailure(upstream: string): void {
    this.host.breakerFailure(upstream, this.response.ctx.routeId);
  }

  request(pool: UpstreamPool, body: Buffer | null | { length: number }, handler: Attempt): UpstreamCall {
    return pool.request(this.method, this.target, this.response.ctx.headers, body, handler);
  }

  /**
   * Once, before any of the answer reached the client, and only with a body we can send again: held
   * whole, or streamed while none of the request has left (the failed call had no connection yet).
   */
  private mayRetry(failure: ForwardFailure): boolean {
    if (this.retried || this.response.client.ended || this.response.client.streaming || failure.retry === 'never') return false;
    // 'unsent' means the failed call never had a connection: every chunk so far is in unsentChunks.
    if (this.streamed !== null) return failure.retry === 'unsent' && this.unsentChunks !== null;
    return failure.retry === 'unsent' || isIdempotent(this.method);
  }
}

/** One try at one host: the pool's handler for it. */
class Attempt implements UpstreamHandler {
  call: UpstreamCall | null;
  /** The call has nothing more to tell (it ended or failed), or we stopped it. */
  private settled = false;
  private paused = false;
  private failureCounted = false;
  /** A final head under 500 came: the answer counts as a success for the breakers once it is complete. */
  private headOk = false;

  constructor(
    private readonly retry: RetryHandler,
    private readonly upstream: string,
    pool: UpstreamPool,
    body: Buffer | null | { length: number },
  ) {
    this.call = null;
    const ctx = retry.response.ctx;
    ctx.upstream = upstream;
    ctx.upstreamSentAt = performance.now();
    if (ctx.upstreamStartedAt === 0) ctx.upstreamStartedAt = ctx.upstreamSentAt;
    ctx.upstreamStatus = 0;
    ctx.upstreamError = null;
    ctx.upstreamMs = -1;
    ctx.upstreamHeaderMs = -1;
    this.call = retry.request(pool, body, this);
  }

  stop(): void {
    if (this.settled) return;
    this.settled = true;
    const call = this.call;
    this.call = null;
    call?.abort();
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.call?.resume();
  }

  onResent(): void {
    this.retry.resent();
  }

  breakerFailure(): void {
    if (this.failureCounted) return;
    this.failureCounted = true;
    this.retry.breakerFailure(this.upstream);
  }

  onHead(status: number, head: ResponseHead): boolean {
    const response = this.retry.response;
    const ctx = response.ctx;
    ctx.upstreamHeaderMs = performance.now() - ctx.upstreamSentAt;
    ctx.upstreamStatus = status;
    try {
      // A success is counted when the answer is complete (onEnd), not at its head: an upstream that cuts
      // every answer short would otherwise reset its failure count with each head and never trip.
      if (status >= 500) this.breakerFailure();
      else this.headOk = true;
      return response.head(status, head);
    } catch (err) {
      response.internalError(err);
      return true;
    }
  }

  onData(chunk: Buffer): boolean {
    const response = this.retry.response;
    try {
      if (response.data(chunk)) return true;
      this.paused = true;
      return false;
    } catch (err) {
      response.internalError(err);
      return true;
    }
  }

  onEnd(): void {
    this.settled = true;
    this.call = null;
    this.ended();
    if (this.headOk && !this.failureCounted) this.retry.breakerSuccess(this.upstream);
    try {
      this.retry.response.end();
    } catch (err) {
      this.retry.response.internalError(err);
    }
  }

  onError(err: UpstreamError): void {
    const weStoppedIt = this.settled;
    this.settled = true;
    this.call = null;
    this.ended();
    if (weStoppedIt) return;
    if (!err.requestSent && (err.code === 'BAD_REQUEST' || err.code === 'CLOSED')) this.retry.notSent();
    this.retry.response.ctx.upstreamError = err.code.toLowerCase();
    if (err.code === 'TLS') this.retry.tlsHandshakeFailed(this.upstream, err);
    if (this.retry.response.clientGone) return;
    try {
      this.retry.failed(this, classifyUpstreamError(err));
    } catch (thrown) {
      this.retry.response.internalError(thrown);
    }
  }

  /** The call is over (answer complete, or failed): its time is taken, the one clock read of this step. */
  private ended(): void {
    const ctx = this.retry.response.ctx;
    const now = performance.now();
    ctx.upstreamEndedAt = now;
    ctx.upstreamMs = now - ctx.upstreamSentAt;
  }

  onBodyDrain(): void {
    try {
      this.retry.onBodyDrain?.();
    } catch (err) {
      this.retry.response.internalError(err);
    }
  }
}
