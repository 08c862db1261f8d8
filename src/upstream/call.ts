/**
 * One request through a pool: the handle the caller holds (writeBody/endBody/resume/abort) and
 * the state the pool and its connection keep about it. The only object allocated per request.
 */
import { UpstreamError, type UpstreamErrorCode } from './call-errors.js';
import type { ResponseHead } from './response-parser.js';
// Type-only circle with connection.ts, on purpose: a call knows the connection carrying it and a
// connection the calls it carries; neither module loads the other.
import type { UpstreamConnection } from './connection.js';

/**
 * What the caller is told. Callbacks are never made from inside pool.request() or abort().
 *
 * Lifetime of the bytes handed out: `head.headers` and the `onData` chunks are views of the
 * connection's read buffer, valid until reading goes on: to the end of the current socket read
 * (microtasks queued during it included) when the callback returned true, or until resume() when it
 * returned false (then onEnd waits for resume() too, so a paused last chunk stays valid). Copy what
 * must live longer.
 */
export interface UpstreamHandler {
  /** The final answer's head (1xx answers are consumed). False pauses reading until call.resume(). */
  onHead(status: number, head: ResponseHead): boolean;
  /** A piece of the body (see above for how long it stays valid). False pauses reading until call.resume(). */
  onData(chunk: Buffer): boolean;
  /** The answer is complete. */
  onEnd(): void;
  /** The call failed. Exactly one of onEnd/onError is called, once, and neither after abort(). */
  onError(err: UpstreamError): void;
  /** writeBody returned false earlier and the socket took the data: write more. */
  onBodyDrain(): void;
  /**
   * Optional: the kept-alive socket the request went on closed before any of the answer, and the call
   * goes once more on a fresh connection to the same host (idempotent requests, once): counted by the caller.
   */
  onResent?(): void;
}

/** What a call needs from its pool. */
export interface CallHost {
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;
  /** The coarse clock of the deadline sweep. */
  readonly now: number;
  /** Takes `call` out of the wait queue. */
  unqueue(call: UpstreamCall): void;
  /** Reports `call`'s failure from a microtask (never from inside request()). */
  failLater(call: UpstreamCall): void;
}

const enum CallState {
  /** In the pool's wait queue, or waiting for the socket being connected for it. */
  Waiting,
  /** Written to a connection (at least partly). */
  Active,
  Done,
}

/** Before the connection exists, a streamed body is held up to this many bytes before writeBody says wait. */
const PENDING_BODY_LIMIT = 64 * 1024;

export class UpstreamCall {
  /** The connection carrying it (or being connected for it). */
  conn: UpstreamConnection | null = null;
  /** Wait queue links. */
  prev: UpstreamCall | null = null;
  next: UpstreamCall | null = null;
  queued = false;
  /** Coarse-clock time by which the answer's head must have arrived. */
  deadline: number;
  /** Some byte of the request may have reached the upstream. */
  requestSent = false;
  /** Some byte of the answer arrived. */
  responseStarted = false;
  /** Already retried once after a stale keep-alive socket. */
  retried = false;
  /** writeBody returned false; onBodyDrain is owed. */
  wantDrain = false;
  bodyEnded = false;
  /** -2: no body, -1: chunked, n: Content-Length n. */
  readonly framing: number;
  /** A failure waiting for failLater's microtask. */
  pendingError: UpstreamError | null = null;

  private state = CallState.Waiting;
  private bodyBytes = 0;
  private pendingBody: Buffer[] | null = null;
  private pendingBytes = 0;

  constructor(
    private readonly pool: CallHost,
    readonly method: string,
    readonly path: string,
    readonly headers: readonly string[],
    /** The whole body when known up front. */
    readonly body: Buffer | null,
    framing: number,
    readonly handler: UpstreamHandler,
  ) {
    this.framing = framing;
    this.deadline = pool.now + pool.headersTimeoutMs;
  }

  get done(): boolean {
    return this.state === CallState.Done;
  }

  /**
   * Writes a piece of a streamed body (`body: { length }` in request()). False: wait for
   * handler.onBodyDrain() before writing more. The chunk is kept until written: do not reuse it.
   */
  writeBody(chunk: Buffer): boolean {
    if (this.state === CallState.Done) return true;
    if (this.framing < -1 || this.body !== null || this.bodyEnded) {
      this.abortConnection();
      this.failNow('BAD_REQUEST', 'writeBody on a call without a streamed body, or after endBody', undefined);
      return true;
    }
    this.bodyBytes += chunk.length;
    if (this.framing >= 0 && this.bodyBytes > this.framing) {
      this.abortConnection();
      this.failNow('BAD_REQUEST', `the request body is longer than its declared ${this.framing} bytes`, undefined);
      return true;
    }
    if (this.state === CallState.Active) return this.conn!.writeBody(this, chunk);
    (this.pendingBody ??= []).push(chunk);
    this.pendingBytes += chunk.length;
    if (this.pendingBytes < PENDING_BODY_LIMIT) return true;
    this.wantDrain = true;
    return false;
  }

  /** The streamed body is complete. */
  endBody(): void {
    if (this.state === CallState.Done || this.bodyEnded || this.framing < -1 || this.body !== null) return;
    this.bodyEnded = true;
    if (this.framing >= 0 && this.bodyBytes !== this.framing) {
      this.abortConnection();
      this.failNow('BAD_REQUEST', `the request body ended after ${this.bodyBytes} of its declared ${this.framing} bytes`, undefined);
      return;
    }
    // The answer's clock starts now that the upstream has everything.
    this.deadline = this.pool.now + this.pool.headersTimeoutMs;
    if (this.state === CallState.Active) this.conn!.writeBodyEnd(this);
  }

  /** Reading goes on after onHead/onData returned false. */
  resume(): void {
    if (this.state === CallState.Active) this.conn!.resume(this);
  }

  /** The caller is gone: nothing more is called on the handler. A queued call leaves the queue at once. */
  abort(): void {
    this.pendingError = null;
    if (this.state === CallState.Done) return;
    this.state = CallState.Done;
    this.pendingBody = null;
    if (this.queued) this.pool.unqueue(this);
    const conn = this.conn;
    if (conn === null) return;
    if (conn.connected) conn.abort(this);
    else conn.unbind(this);
  }

  // ---- for the pool and the connection -----------------------------------------------------------

  /** The request head goes out now. */
  sent(): void {
    this.state = CallState.Active;
    this.requestSent = true;
    this.responseStarted = false;
  }

  takePendingBody(): Buffer[] | null {
    const pending = this.pendingBody;
    this.pendingBody = null;
    this.pendingBytes = 0;
    return pending;
  }

  /** Idempotent, and nothing streamed that could not be sent again. */
  mayRetryStale(): boolean {
    if (this.retried || this.state === CallState.Done || (this.framing !== -2 && this.body === null)) return false;
    const m = this.method;
    return m === 'GET' || m === 'HEAD' || m === 'OPTIONS' || m === 'PUT' || m === 'DELETE';
  }

  /** Back to waiting, for a retry on a fresh connection. */
  requeued(): void {
    this.retried = true;
    this.state = CallState.Waiting;
    this.handler.onResent?.();
  }

  ended(): void {
    if (this.state === CallState.Done) return;
    this.state = CallState.Done;
    this.handler.onEnd();
  }

  failNow(code: UpstreamErrorCode, message: string, cause: unknown): void {
    if (this.state === CallState.Done) return;
    this.state = CallState.Done;
    this.pendingBody = null;
    if (this.queued) this.pool.unqueue(this);
    this.handler.onError(new UpstreamError(code, message, this.requestSent, this.responseStarted, cause));
  }

  /** Fails from a microtask: for failures found while request() is still running. */
  failSoon(code: UpstreamErrorCode, message: string): void {
    if (this.state === CallState.Done) return;
    this.state = CallState.Done;
    if (this.queued) this.pool.unqueue(this);
    this.pendingError = new UpstreamError(code, message, this.requestSent, this.responseStarted);
    this.pool.failLater(this);
  }

  /** Delivers a failSoon error unless the call was aborted meanwhile. */
  deliverPendingError(): void {
    const err = this.pendingError;
    this.pendingError = null;
    if (err !== null) this.handler.onError(err);
  }

  private abortConnection(): void {
    const conn = this.conn;
    if (conn === null) return;
    conn.unbind(this);
    if (conn.connected) conn.destroy();
  }
}
