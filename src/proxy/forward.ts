/**
 * One proxied request: the uWS response on one side, a call through the gateway's own upstream
 * client (src/upstream/) on the other, with backpressure both ways. The object is the call's
 * UpstreamHandler.
 *
 * Lifecycle: the data plane creates it, registers onAborted/onData, and calls start(). `ended`
 * means the client response is over (completed, answered with a problem, or the connection closed):
 * from then on `res` is never touched. `upstreamSettled` means the call has nothing more to tell us
 * (it ended or failed) or we aborted it.
 *
 * The answer's header names and values and its body chunks are views of the upstream connection's
 * read buffer, valid until reading goes on (see UpstreamHandler): the head is written to uWS within
 * the same read (with the first body bytes, or at the end of the read's microtasks), and a chunk uWS
 * could not take whole is held only while the call is paused.
 *
 * No handler callback may throw into the client: a throw would end the worker with every connection
 * it holds. Each callback is guarded; a throw (a bug of ours, or of a middleware observer) ends this
 * exchange with a 502, or a closed connection once the answer had started.
 */
import type { Breakers } from './breaker.js';
import type { UwsResponse } from '../native/uws-types.js';
import type { RequestContext } from './request-context.js';
import { CHUNK_PIECE_BYTES, CORK_BUFFER_BYTES, CORK_SLACK_BYTES, fitsInCork, headerBytes } from '../http/cork-budget.js';
import { writeContent, writeProblem } from '../http/problem.js';
import type { ContentAnswer } from '../middleware/types.js';
import { statusLineBytes } from '../http/status-line.js';
import { classifyUpstreamError, isIdempotent, type ForwardFailure } from './forward-errors.js';
import type { UpstreamPool } from '../upstream/pool.js';
import type { UpstreamCall, UpstreamHandler } from '../upstream/call.js';
import type { UpstreamError } from '../upstream/errors.js';
import type { ResponseHead } from '../upstream/response-parser.js';
import { isDateHeader, isViaHeader } from './headers.js';
import { performance } from 'node:perf_hooks';
import { headerValue } from '../observe/request-observe.js';

/** What an exchange needs from the data plane that owns it. */
export interface ExchangeHost {
  /** `1.1 <name>`, the gateway's Via entry. */
  readonly via: string;
  /** The same, as bytes (uWS copies a Buffer as it is; a string it converts first). */
  readonly viaBytes: Buffer;
  readonly maxBodyBytes: number;
  readonly breakers: Breakers;
  /** Shutting down: ask clients to close their connections. */
  readonly closing: boolean;
  /** The client response is over; called once per exchange. */
  exchangeDone(exchange: Exchange): void;
  /**
   * Another host of the exchange's endpoint that may take it now (breakers asked), other than the one
   * that failed; null when there is none. Counts the retry.
   */
  retryTarget(exchange: Exchange, failure: ForwardFailure): string | null;
  poolFor(upstream: string): UpstreamPool;
  /** An upstream call failed (counted for /metrics). */
  upstreamFailed(failure: ForwardFailure): void;
}

const enum BodyMode {
  /** HEAD, 204, 304: headers only. */
  None,
  /** Content-Length known: tryEnd. */
  Sized,
  /** Length unknown: chunked write. */
  Chunked,
}

const EMPTY = new Uint8Array(0);
const CONTENT_LENGTH = Buffer.from('content-length');
/** A streamed request body of unknown length (the client sent it chunked): sent chunked. */
const UNKNOWN_LENGTH = Object.freeze({ length: -1 });
const INTERNAL_DETAIL = 'the gateway failed to handle the upstream answer';

export class Exchange implements UpstreamHandler {
  /** Still expecting request body bytes from the client. */
  receiving = false;
  /** performance.now() by which the whole request must have arrived. */
  receiveDeadline = 0;

  /** The client asked HEAD: send headers only. */
  private readonly headersOnly: boolean;

  private ended = false;
  /** The upstream's answer reached the client whole. */
  private completed = false;
  private clientGone = false;
  private reported = false;
  private headWritten = false;
  /** The upstream's head, waiting to be written together with the first body bytes. */
  private pendingHead: ResponseHead | null = null;
  /** The head's status line and headers went out already, in corks of their own (spillHead). */
  private headSpilled = false;
  private mode = BodyMode.Chunked;
  private totalSize = 0;

  /** The running upstream call; null before it is made and once it is settled. */
  private call: UpstreamCall | null = null;
  private upstreamSettled = false;
  private upstreamComplete = false;
  private upstreamPaused = false;
  private breakerFailed = false;
  /** Part of a Sized chunk uWS did not take yet, and the write offset where that chunk started. */
  private pending: Uint8Array | null = null;
  private pendingOffset = 0;
  private writableRegistered = false;

  private dispatched = false;
  /** The request body goes to the upstream as it arrives (not retryable). */
  private streaming = false;
  /** The whole request body, held in memory (a retry sends it again); null for none or streamed. */
  private body: Buffer | null = null;
  private clientPaused = false;

  /** Already sent to a second host after a failure: no further retry. */
  private retried = false;

  constructor(
    private readonly host: ExchangeHost,
    readonly res: UwsResponse,
    readonly ctx: RequestContext,
    private pool: UpstreamPool,
    /** Sent upstream: GET for a HEAD served by GET. */
    private readonly method: string,
    /** Path and query as forwarded. */
    private readonly target: string,
  ) {
    this.headersOnly = ctx.method === 'HEAD';
  }

  /** Forwards now when there is no body; otherwise when its first bytes arrive (see onClientData). */
  start(hasBody: boolean): void {
    if (hasBody) {
      this.receiving = true;
      return;
    }
    this.dispatch(null);
  }

  /**
   * Forwards a request whose body was held while middleware decided (see held-request.ts): `chunks`
   * arrived so far, `complete` once the last one did, `paused` when the client socket was paused.
   */
  startHeld(chunks: readonly Buffer[], complete: boolean, paused: boolean): void {
    if (!this.ctx.hasBody) return this.dispatch(null);
    if (complete) {
      const whole = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
      return this.dispatch(whole.length > 0 ? whole : null);
    }
    this.receiving = true;
    this.clientPaused = paused;
    const call = this.dispatchStreamed();
    let writable = true;
    for (let i = 0; i < chunks.length; i++) writable = call.writeBody(chunks[i]);
    if (writable) this.releaseClientBody();
    else this.pauseClient();
  }

  private dispatch(body: Buffer | null): void {
    this.dispatched = true;
    this.ctx.upstreamStartedAt = performance.now();
    this.body = body;
    this.call = this.pool.request(this.method, this.target, this.ctx.headers, body, this);
  }

  private dispatchStreamed(): UpstreamCall {
    this.dispatched = true;
    this.ctx.upstreamStartedAt = performance.now();
    this.streaming = true;
    const length = this.ctx.bodyLength;
    const call = this.pool.request(this.method, this.target, this.ctx.headers, length >= 0 ? { length } : UNKNOWN_LENGTH, this);
    this.call = call;
    return call;
  }

  // ---- client side ---------------------------------------------------------------------------

  onClientAborted(): void {
    if (this.ended) return;
    this.ended = true;
    this.clientGone = true;
    this.receiving = false;
    if (!this.headWritten) this.ctx.status = 499;
    this.stopUpstream();
    this.report();
  }

  /** uWS body chunk; `chunk` is only valid during this call. */
  onClientData(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.ended || !this.receiving) return;
    const length = chunk.byteLength;
    this.ctx.bytesIn += length;
    if (this.ctx.bytesIn > this.host.maxBodyBytes) {
      this.answerItself(413, `the request body is larger than ${this.host.maxBodyBytes} bytes`);
      return;
    }
    if (isLast) this.receiving = false;
    // Ours: the call keeps it until the socket took it, a capture keeps it for its listeners.
    const copy = length > 0 ? Buffer.from(new Uint8Array(chunk)) : null;
    if (copy !== null) this.ctx.capture?.addRequestChunk(copy);
    if (!this.dispatched) {
      if (isLast) {
        // The whole body came with the head: forwarded as one buffer (and retryable).
        this.dispatch(copy);
        return;
      }
      this.dispatchStreamed();
    }
    const call = this.call;
    if (call === null) return;
    if (copy !== null && !call.writeBody(copy) && !isLast) this.pauseClient();
    if (isLast) call.endBody();
  }

  /** The call took the body written so far: the client may send more. */
  onBodyDrain(): void {
    try {
      this.releaseClientBody();
    } catch (err) {
      this.internalError(err);
    }
  }

  /** The client did not send its whole request within timeouts.clientRequestMs. */
  onClientTooSlow(): void {
    if (this.ended || !this.receiving) return;
    this.answerItself(408, 'the request was not received in time');
  }

  // ---- the upstream call (UpstreamHandler) ----------------------------------------------------

  onHead(status: number, head: ResponseHead): boolean {
    try {
      return this.upstreamHead(status, head);
    } catch (err) {
      this.internalError(err);
      return true;
    }
  }

  onData(chunk: Buffer): boolean {
    try {
      return this.upstreamData(chunk);
    } catch (err) {
      this.internalError(err);
      return true;
    }
  }

  onEnd(): void {
    try {
      this.upstreamEnd();
    } catch (err) {
      this.internalError(err);
    }
  }

  onError(err: UpstreamError): void {
    try {
      this.upstreamError(err);
    } catch (thrown) {
      this.internalError(thrown);
    }
  }

  private upstreamHead(status: number, head: ResponseHead): boolean {
    const ctx = this.ctx;
    ctx.status = status;
    if (status >= 500) this.breakerFailure();
    else this.host.breakers.onSuccess(ctx.upstream!, ctx.routeId);
    if (this.ended) return true;

    const observers = ctx.observers;
    if (observers !== null) {
      if (status >= 500 && this.substituted(status)) return true;
      const headers = endToEndHeaders(head.headers);
      for (let i = observers.length - 1; i >= 0; i--) observers[i].onHead(status, headers);
    }
    this.pendingHead = head;
    if (mayOverflowCork(head)) this.spillHead(head);
    if (this.headersOnly || status === 204 || status === 304) {
      this.mode = BodyMode.None;
      corkTarget = this;
      this.res.cork(corkedHeadOnly);
      // A HEAD served by GET: the GET's body is not wanted. The client drains a small one to keep
      // its connection and drops the connection of a large one.
      if (head.contentLength !== 0) this.stopUpstream();
      return true;
    }
    const length = head.contentLength;
    if (length >= 0) {
      this.mode = BodyMode.Sized;
      this.totalSize = length;
    } else {
      this.mode = BodyMode.Chunked;
    }
    // The head goes out with the first body bytes (one write for a small answer). When none follow
    // in this read, it goes out at the end of the read (its views are valid until then).
    if (!head.bodyFollows) queueHead(this);
    return true;
  }

  private upstreamData(chunk: Buffer): boolean {
    if (this.ended || this.mode === BodyMode.None) return true;
    const observers = this.ctx.observers;
    if (observers !== null) for (let i = observers.length - 1; i >= 0; i--) observers[i].onData(chunk);
    this.ctx.bytesOut += chunk.length;
    corkTarget = this;
    corkChunk = chunk;
    corkOversized = false;
    this.res.cork(corkedBodyChunk);
    corkChunk = EMPTY;
    if (corkOversized) return this.writeChunkPieces(chunk);
    return corkWriteOk;
  }

  /**
   * A chunk larger than one cork may carry (src/http/cork-budget.ts): chunked writes of a cork each.
   * uWS keeps whatever the socket does not take; then the upstream waits for onWritable.
   */
  private writeChunkPieces(chunk: Buffer): boolean {
    let writable = true;
    for (let at = 0; at < chunk.length && !this.ended; at += CHUNK_PIECE_BYTES) {
      corkTarget = this;
      corkChunk = chunk.subarray(at, Math.min(at + CHUNK_PIECE_BYTES, chunk.length));
      this.res.cork(corkedChunkPiece);
      if (!corkWriteOk) writable = false;
    }
    corkChunk = EMPTY;
    if (writable || this.ended) return true;
    this.upstreamPaused = true;
    this.awaitWritable();
    return false;
  }

  private upstreamEnd(): void {
    this.ctx.upstreamEndedAt = performance.now();
    this.upstreamComplete = true;
    this.upstreamSettled = true;
    this.call = null;
    if (this.ended) return;
    // A Sized chunk still draining: onWritable ends the response once the rest is written.
    if (this.pending !== null) return;
    corkTarget = this;
    this.res.cork(corkedFinish);
  }

  private upstreamError(err: UpstreamError): void {
    const weStoppedIt = this.upstreamSettled;
    this.ctx.upstreamEndedAt = performance.now();
    this.upstreamSettled = true;
    this.call = null;
    if (weStoppedIt || this.clientGone) return;
    const failure = classifyUpstreamError(err);
    this.host.upstreamFailed(failure);
    if (failure.upstreamFault) this.breakerFailure();
    if (!this.ended && this.mayRetry(failure) && this.retryElsewhere(failure)) return;
    if (this.ended) return;
    if (this.headWritten) {
      // Part of the answer is on the wire: the client must see a broken response, not a complete one.
      this.closeClient();
      return;
    }
    this.pendingHead = null;
    if (this.ctx.observers !== null && this.substituted(failure.status)) return;
    this.writeOwnProblem(failure.status, failure.detail);
  }

  /** A handler callback threw: this exchange ends (502, or a cut connection), the worker goes on. */
  private internalError(err: unknown): void {
    process.emitWarning(err instanceof Error ? err : new Error(String(err)), 'DataPlaneError');
    this.stopUpstream();
    if (this.ended) return;
    try {
      if (this.headWritten) {
        this.closeClient();
      } else {
        this.pendingHead = null;
        this.writeOwnProblem(502, INTERNAL_DETAIL);
      }
    } catch {
      // The response could not be written either: count the request out.
      this.ended = true;
      this.report();
    }
  }

  // ---- response observers (middleware watching the answer, src/proxy/request-context.ts) ---------

  /** Asks the observers for content to send instead of a failed answer; writes it when one offers. */
  private substituted(status: number): boolean {
    const observers = this.ctx.observers!;
    for (let i = observers.length - 1; i >= 0; i--) {
      const answer = observers[i].substitute(status);
      if (answer === null) continue;
      this.stopUpstream();
      this.pendingHead = null;
      corkTarget = this;
      corkContent = answer;
      this.res.cork(corkedContent);
      corkContent = null;
      return true;
    }
    return false;
  }

  /** Corked: content an observer offered in place of the upstream's failure. */
  writeContentCorked(answer: ContentAnswer): void {
    this.releaseClientBody();
    this.ended = true;
    this.ctx.status = answer.status;
    this.ctx.cache = headerValue(answer.headers, 'x-cache');
    this.ctx.bytesOut = writeContent(this.res, answer.status, answer.headers, answer.body, {
      via: this.host.via,
      headersOnly: this.headersOnly,
      closeConnection: this.receiving || this.host.closing,
      headers: this.ctx.responseHeaders,
    });
    this.report();
  }

  // ---- retry on another host (issue 9: a dead host of two must not fail half the requests) -----

  /**
   * Once, before any of the answer reached the client, and only with a body we still hold whole (a
   * streamed one was consumed by the failed attempt).
   */
  private mayRetry(failure: ForwardFailure): boolean {
    if (this.retried || this.headWritten || this.pendingHead !== null || failure.retry === 'never' || this.streaming) return false;
    return failure.retry === 'unsent' || isIdempotent(this.method);
  }

  private retryElsewhere(failure: ForwardFailure): boolean {
    const next = this.host.retryTarget(this, failure);
    if (next === null) return false;
    this.retried = true;
    this.ctx.upstream = next;
    this.pool = this.host.poolFor(next);
    this.upstreamSettled = false;
    this.upstreamComplete = false;
    this.upstreamPaused = false;
    this.breakerFailed = false;
    this.ctx.status = 0;
    this.call = this.pool.request(this.method, this.target, this.ctx.headers, this.body, this);
    return true;
  }

  // ---- writing to the client (always inside res.cork) -----------------------------------------

  /**
   * Corked: status line and upstream headers (hop-by-hop already dropped by the client; Date dropped,
   * Via appended). Returns the bytes written (the cork budget).
   */
  writeHead(): number {
    const res = this.res;
    const head = this.pendingHead!;
    this.pendingHead = null;
    this.headWritten = true;
    const ctx = this.ctx;
    let bytes = this.headSpilled ? 0 : writeHeadBlock(res, statusLineBytes(ctx.status), head.source, head.spans, this.host.viaBytes);
    // uWS frames Sized/Chunked bodies itself; a headers-only answer carries the length a GET would have had.
    if (this.mode === BodyMode.None && ctx.status !== 204 && head.declaredLength >= 0) {
      res.writeHeader(CONTENT_LENGTH, String(head.declaredLength));
    }
    const added = ctx.responseHeaders;
    if (added !== null) {
      for (let i = 0; i < added.length; i += 2) {
        res.writeHeader(added[i], added[i + 1]);
        bytes += headerBytes(added[i], added[i + 1]);
      }
    }
    if (this.host.closing || this.receiving) res.writeHeader('connection', 'close');
    return bytes;
  }

  /**
   * Not corked: a head too large to share one cork with what follows it (src/http/cork-budget.ts)
   * goes out now, in corks of at most HEAD_PIECE_BYTES each, cut at line ends: the status line and
   * the first headers by writeStatus, the others by writeHeader. writeHead then adds only the rest
   * (Content-Length of a headers-only answer, the middleware's headers, Connection: close) in the
   * cork that carries the body. Heads this large are rare (the upstream client admits 16 KiB).
   */
  private spillHead(head: ResponseHead): void {
    const length = fillHeadBlock(statusLineBytes(this.ctx.status), head.source, head.spans, this.host.viaBytes);
    let rest = 0;
    const added = this.ctx.responseHeaders;
    if (added !== null) for (let i = 0; i < added.length; i += 2) rest += headerBytes(added[i], added[i + 1]);
    if (length + STATUS_FRAMING + rest + HEAD_REST_BYTES <= HEAD_PIECE_BYTES) return;
    this.headSpilled = true;
    const res = this.res;
    const block = headBlock;
    let start = 0;
    while (start < length) {
      const end = pieceEnd(block, start, length);
      const piece = block.subarray(start, end);
      if (start === 0) {
        res.cork(() => res.writeStatus(piece));
      } else {
        res.cork(() => {
          for (let at = 0; at < piece.length; ) {
            let lineEnd = nextLineEnd(piece, at);
            if (lineEnd === -1) lineEnd = piece.length;
            const colon = piece.indexOf(0x3a, at);
            // "name: value": the name is a token (no colon), the block puts one space after it.
            res.writeHeader(piece.subarray(at, colon), piece.subarray(colon + 2, lineEnd));
            at = lineEnd + 2;
          }
        });
      }
      start = end + 2;
    }
  }

  /** Corked: a headers-only answer. */
  writeHeadOnly(): void {
    this.writeHead();
    this.releaseClientBody();
    this.ended = true;
    this.completed = true;
    // No argument: see native-notes.md on endWithoutBody in uWS 20.30.
    this.res.endWithoutBody();
    this.report();
  }

  /**
   * Corked: one upstream body chunk. False when the client is behind (the upstream is then paused).
   * A chunked one too large for this cork is left to writeChunkPieces (corkOversized).
   */
  writeBodyChunk(chunk: Buffer): boolean {
    const res = this.res;
    const head = this.pendingHead !== null ? this.writeHead() : 0;
    if (this.mode === BodyMode.Sized) {
      // uWS's write offset before this chunk: every earlier chunk was taken whole (a partly taken one
      // pauses the upstream until onWritable has written the rest), so it is the body sent before it.
      const offset = this.ctx.bytesOut - chunk.length;
      if (offset === 0 && chunk.length === this.totalSize && fitsInCork(head, chunk.length)) {
        // The whole body in one chunk (most answers): end() takes it all at once (buffering what the
        // socket cannot take now), without tryEnd's result array.
        res.end(chunk);
        this.onClientResponseEnded();
        return true;
      }
      const [ok, done] = res.tryEnd(chunk, this.totalSize);
      if (done) {
        this.onClientResponseEnded();
        return true;
      }
      if (ok) return true;
      // uWS did not take all of it: the view stays valid while the call is paused (see the file comment).
      this.pending = chunk;
      this.pendingOffset = offset;
    } else if (!fitsInCork(head, chunk.length)) {
      corkOversized = true;
      return true;
    } else if (res.write(chunk)) {
      return true;
    }
    this.upstreamPaused = true;
    this.awaitWritable();
    return false;
  }

  /** Corked: the upstream answer is complete. */
  finishResponse(): void {
    if (this.ended) return;
    const res = this.res;
    if (this.pendingHead !== null) this.writeHead();
    this.releaseClientBody();
    if (this.mode === BodyMode.Sized) {
      const [, done] = res.tryEnd(EMPTY, this.totalSize);
      if (done) {
        this.onClientResponseEnded();
        return;
      }
      // Fewer bytes than the upstream's Content-Length (the client refuses such answers): a broken answer.
      this.closeClient();
      return;
    }
    this.ended = true;
    this.completed = true;
    res.end();
    this.report();
  }

  /** Corked: a problem+json answer of the gateway's own. */
  writeProblemCorked(): void {
    this.releaseClientBody();
    this.ended = true;
    this.ctx.bytesOut = writeProblem(this.res, this.ctx.status, problemDetail, {
      via: this.host.via,
      headersOnly: this.headersOnly,
      // A body still arriving cannot be skipped cheaply; a closing gateway wants connections gone.
      closeConnection: this.receiving || this.host.closing,
      headers: this.ctx.responseHeaders,
    });
    this.report();
  }

  private onWritable(offset: number): boolean {
    if (this.ended) return true;
    const pending = this.pending;
    if (pending !== null) {
      const [ok, done] = this.res.tryEnd(pending.subarray(offset - this.pendingOffset), this.totalSize);
      if (done) {
        this.pending = null;
        this.onClientResponseEnded();
        this.resumePausedUpstream();
        return true;
      }
      if (!ok) return false;
      this.pending = null;
      if (this.upstreamComplete) {
        this.finishResponse();
        return true;
      }
    }
    // The call may go on reading right here (onData/onEnd from inside resume()).
    this.resumePausedUpstream();
    return true;
  }

  // ---- helpers -------------------------------------------------------------------------------

  private onClientResponseEnded(): void {
    this.ended = true;
    this.completed = true;
    this.report();
  }

  private resumePausedUpstream(): void {
    if (!this.upstreamPaused) return;
    this.upstreamPaused = false;
    this.call?.resume();
  }

  private awaitWritable(): void {
    if (this.writableRegistered) return;
    this.writableRegistered = true;
    this.res.onWritable((offset) => {
      try {
        return this.onWritable(offset);
      } catch (err) {
        this.internalError(err);
        return true;
      }
    });
  }

  private pauseClient(): void {
    if (this.clientPaused) return;
    this.clientPaused = true;
    this.res.pause();
  }

  /** The client may send more body; also before ending the response (a paused socket would never read the rest). */
  private releaseClientBody(): void {
    if (!this.clientPaused || this.ended) return;
    this.clientPaused = false;
    this.res.resume();
  }

  /** Answers with a problem of the gateway's own, stopping the upstream request if any. */
  private answerItself(status: number, detail: string): void {
    this.stopUpstream();
    if (this.headWritten) {
      this.closeClient();
      return;
    }
    this.pendingHead = null;
    this.writeOwnProblem(status, detail);
  }

  private writeOwnProblem(status: number, detail: string): void {
    this.ctx.status = status;
    problemDetail = detail;
    corkTarget = this;
    this.res.cork(corkedProblem);
  }

  private closeClient(): void {
    this.ended = true;
    this.receiving = false;
    this.report();
    // onAborted runs synchronously from close(); `ended` makes it a no-op.
    this.res.close();
  }

  /** Nothing more is wanted from the upstream; not yet sent (waiting for body bytes): never will be. */
  private stopUpstream(): void {
    if (this.upstreamSettled) return;
    this.upstreamSettled = true;
    const call = this.call;
    this.call = null;
    call?.abort();
  }

  private breakerFailure(): void {
    if (this.breakerFailed) return;
    this.breakerFailed = true;
    this.host.breakers.onFailure(this.ctx.upstream!, this.ctx.routeId);
  }

  private report(): void {
    if (this.reported) return;
    this.reported = true;
    this.receiving = false;
    const observers = this.ctx.observers;
    if (observers !== null) {
      for (let i = observers.length - 1; i >= 0; i--) {
        try {
          if (this.completed) observers[i].onEnd();
          else observers[i].onAbort();
        } catch (err) {
          process.emitWarning(err instanceof Error ? err : new Error(String(err)), 'DataPlaneError');
        }
      }
    }
    this.host.exchangeDone(this);
  }

  /** The queued head goes out now unless body bytes or the end carried it out already. */
  flushHead(): void {
    if (this.pendingHead === null || this.ended) return;
    corkTarget = this;
    try {
      this.res.cork(corkedHead);
    } catch (err) {
      this.internalError(err);
    }
  }

  /**
   * Corked: the head alone, its body still to come. With a known length, uWS completes the head on
   * the wire (Content-Length and the blank line) by an empty tryEnd; a chunked head is completed by
   * uWS with the first chunk only.
   */
  writeHeadAhead(): void {
    this.writeHead();
    if (this.mode === BodyMode.Sized) this.res.tryEnd(EMPTY, this.totalSize);
  }
}

/**
 * The status line, the upstream's headers and Via go to uWS in one writeStatus call: uWS writes
 * "HTTP/1.1 ", the bytes given, then CRLF, so "200 OK\r\nname: value\r\nvia: 1.1 gw" is the status line
 * followed by header lines, exactly what one writeHeader call per header would write. One native call
 * and no view per name and value instead of a call and two views per header (a GitHub-like answer has
 * 20-30 headers). Safe because the upstream client admitted only token names and values free of CR,
 * LF and NUL. Date is left out (uWS writes its own); the upstream's Via values come first in ours.
 * Returns the bytes written (the cork budget).
 */
function writeHeadBlock(res: UwsResponse, statusLine: Buffer, source: Buffer, spans: readonly number[], ourVia: Buffer): number {
  const p = fillHeadBlock(statusLine, source, spans, ourVia);
  res.writeStatus(new Uint8Array(headBlock.buffer, headBlock.byteOffset, p));
  return p + 2;
}

/** Writes status line, headers and Via into headBlock (see writeHeadBlock); returns the length. */
function fillHeadBlock(statusLine: Buffer, source: Buffer, spans: readonly number[], ourVia: Buffer): number {
  // Every upstream header counted whole (name, ": ", value, CRLF) covers what its Via value adds (", " + value).
  let size = statusLine.length + VIA_LINE.length + ourVia.length;
  for (let i = 0; i < spans.length; i += 4) size += spans[i + 1] - spans[i] + spans[i + 3] - spans[i + 2] + 4;
  if (size > headBlock.length) headBlock = Buffer.allocUnsafeSlow(Math.max(size, 2 * headBlock.length));
  const block = headBlock;
  block.set(statusLine, 0);
  let p = statusLine.length;
  let vias = 0;
  for (let i = 0; i < spans.length; i += 4) {
    const nameStart = spans[i];
    const nameEnd = spans[i + 1];
    const nameLength = nameEnd - nameStart;
    if (nameLength === 4 && isDateHeader(source, nameStart)) continue;
    if (nameLength === 3 && isViaHeader(source, nameStart)) {
      vias++;
      continue;
    }
    block[p++] = 0x0d;
    block[p++] = 0x0a;
    for (let j = nameStart; j < nameEnd; j++) block[p++] = source[j];
    block[p++] = 0x3a;
    block[p++] = 0x20;
    for (let j = spans[i + 2], end = spans[i + 3]; j < end; j++) block[p++] = source[j];
  }
  block.set(VIA_LINE, p);
  p += VIA_LINE.length;
  if (vias > 0) {
    // Rare (another proxy upstream of us): the upstream's values, in order, before ours.
    for (let i = 0; i < spans.length; i += 4) {
      if (spans[i + 1] - spans[i] !== 3 || !isViaHeader(source, spans[i])) continue;
      for (let j = spans[i + 2], end = spans[i + 3]; j < end; j++) block[p++] = source[j];
      block[p++] = 0x2c;
      block[p++] = 0x20;
    }
  }
  block.set(ourVia, p);
  p += ourVia.length;
  return p;
}

/** The bytes of one cork of a spilled head, uWS's "HTTP/1.1 " and CRLF included. */
const HEAD_PIECE_BYTES = CORK_BUFFER_BYTES - CORK_SLACK_BYTES;
/** What writeStatus adds around the block: "HTTP/1.1 " and CRLF. */
const STATUS_FRAMING = 11;
/** The most writeHead adds after the block itself: Content-Length of a headers-only answer and Connection: close. */
const HEAD_REST_BYTES = 64;
/** Headers spanning at most this many bytes of the answer cannot make a head block that needs spilling. */
const SMALL_HEAD_SPAN = 8 * 1024;

/**
 * Whether the head may be too large for one cork: the bytes from its first kept name to its last kept
 * value bound the block (each header's ": " and CRLF may add a byte or two over the wire's; Via adds
 * its own). O(1), so that the common head costs nothing more; spillHead measures the block exactly.
 */
function mayOverflowCork(head: ResponseHead): boolean {
  const spans = head.spans;
  return spans.length !== 0 && spans[spans.length - 1] - spans[0] > SMALL_HEAD_SPAN;
}

/**
 * Where the piece of a spilled head that starts at `start` ends: the last line end (CRLF) within
 * HEAD_PIECE_BYTES, or the end of the block; a single longer line is a piece of its own.
 */
function pieceEnd(block: Buffer, start: number, length: number): number {
  if (length - start + STATUS_FRAMING <= HEAD_PIECE_BYTES) return length;
  const limit = start + HEAD_PIECE_BYTES - STATUS_FRAMING;
  let end = -1;
  for (let at = nextLineEnd(block, start); at !== -1 && at <= limit; at = nextLineEnd(block, at + 2)) end = at;
  if (end !== -1) return end;
  const next = nextLineEnd(block, start);
  return next === -1 || next > length ? length : next;
}

function nextLineEnd(block: Buffer, from: number): number {
  return block.indexOf(CRLF, from);
}
const CRLF = Buffer.from('\r\n', 'latin1');

/** Grown to the largest head seen; uWS copies what writeStatus is given before it returns. */
let headBlock = Buffer.allocUnsafeSlow(4096);
const VIA_LINE = Buffer.from('\r\nvia: ', 'latin1');

/** The headers writeHead passes on, as strings (flat, names lower-case): built only for observers. */
function endToEndHeaders(raw: readonly Buffer[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i];
    if ((name.length === 4 && isDateHeader(name)) || (name.length === 3 && isViaHeader(name))) continue;
    out.push(name.toString('latin1').toLowerCase(), raw[i + 1].toString('latin1'));
  }
  return out;
}

// uWS's cork takes a callback; these module-level trampolines spare a closure per call.
let corkTarget: Exchange;
let corkChunk: Buffer | Uint8Array = EMPTY;
let corkWriteOk = true;
/** Set by writeBodyChunk: the chunk goes out in pieces, after the cork. */
let corkOversized = false;
let problemDetail = '';

function corkedBodyChunk(): void {
  corkWriteOk = corkTarget.writeBodyChunk(corkChunk as Buffer);
}
function corkedChunkPiece(): void {
  corkWriteOk = corkTarget.res.write(corkChunk);
}
function corkedFinish(): void {
  corkTarget.finishResponse();
}
function corkedHeadOnly(): void {
  corkTarget.writeHeadOnly();
}
function corkedProblem(): void {
  corkTarget.writeProblemCorked();
}
let corkContent: ContentAnswer | null = null;
function corkedContent(): void {
  corkTarget.writeContentCorked(corkContent!);
}
function corkedHead(): void {
  corkTarget.writeHeadAhead();
}

const headQueue: Exchange[] = [];
let headFlushQueued = false;
/** A promise reaction is a microtask at about half the cost of queueMicrotask (no AsyncResource). */
const RESOLVED = Promise.resolve();

/**
 * Writes the head at the end of this tick unless body bytes or completion carried it out first. The
 * microtask runs before the upstream connection reads again, so the head's views are still valid.
 */
function queueHead(exchange: Exchange): void {
  headQueue.push(exchange);
  if (headFlushQueued) return;
  headFlushQueued = true;
  void RESOLVED.then(flushHeads);
}

function flushHeads(): void {
  headFlushQueued = false;
  for (let i = 0; i < headQueue.length; i++) headQueue[i].flushHead();
  headQueue.length = 0;
}
