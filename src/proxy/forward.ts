/**
 * One proxied request: the uWS response on one side, an undici request on the other, with
 * backpressure both ways. The object is the undici dispatch handler (the legacy onConnect/onHeaders/
 * onData/onComplete/onError form, which undici 7 calls without an adapter and which hands raw
 * header buffers that go to uWS without decoding).
 *
 * Lifecycle: the data plane creates it, registers onAborted/onData, and calls start(). `ended`
 * means the client response is over (completed, answered with a problem, or the connection closed):
 * from then on `res` is never touched. `upstreamSettled` means undici has nothing more to tell us or
 * we told it to stop.
 */
import type { Dispatcher, Pool } from 'undici';
import type { Breakers } from './breaker.js';
import type { UwsResponse } from '../native/uws-types.js';
import type { RequestContext } from './request-context.js';
import { writeContent, writeProblem } from '../http/problem.js';
import type { ContentAnswer } from '../middleware/types.js';
import { statusLine } from '../http/status-line.js';
import { RequestBodyStream, type BodySource } from './forward-body.js';
import { classifyForwardError, isIdempotent, type ForwardFailure } from './forward-errors.js';
import {
  classifyResponseHeader,
  connectionNamedHeaders,
  parseDigits,
  isPlainConnectionValue,
  ResponseHeader,
} from './headers.js';

/** What an exchange needs from the data plane that owns it. */
export interface ExchangeHost {
  /** `1.1 <name>`, the gateway's Via entry. */
  readonly via: string;
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
  poolFor(upstream: string): Pool;
}

const enum BodyMode {
  /** HEAD, 204, 304: headers only. */
  None,
  /** Content-Length known: tryEnd. */
  Sized,
  /** Length unknown: chunked write. */
  Chunked,
}

/** A HEAD served by GET drains an upstream body up to this size (keeping the connection); larger ones are aborted. */
const HEAD_DRAIN_LIMIT = 64 * 1024;
const EMPTY = new Uint8Array(0);
/** The first upstream headers are tracked by bit masks in one 32-bit integer; later ones are classified again. */
const HEADER_BITS = 31;

class ExchangeAbort extends Error {
  readonly code = 'SPECGATE_EXCHANGE_ABORTED';
}
const CLIENT_GONE = new ExchangeAbort('the client went away');
const GATEWAY_ANSWERED = new ExchangeAbort('the gateway answered the client itself');
const HEAD_BODY_DROPPED = new ExchangeAbort('the body of a GET serving a HEAD is not needed');

export class Exchange implements Dispatcher.DispatchHandler, BodySource {
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
  /** Upstream status and headers waiting to be written together with the first body bytes. */
  private pendingHead: Buffer[] | null = null;
  private mode = BodyMode.Chunked;
  private totalSize = 0;
  private responseContentLength = -1;
  /**
   * From scanUpstreamHeaders for writeHead, so each header is classified once: bit k set when the k-th
   * upstream header passes through / is a Content-Length (k < HEADER_BITS; later headers have no bit).
   */
  private passHeaders = 0;
  private lengthHeaders = 0;
  private upstreamVia: Buffer | null = null;
  private upstreamConnection: string | null = null;

  private upstreamAbort: ((err?: Error) => void) | null = null;
  private upstreamSettled = false;
  private upstreamComplete = false;
  private resumeUpstream: (() => void) | null = null;
  private upstreamPaused = false;
  private breakerFailed = false;
  /** Part of a Sized chunk uWS did not take yet, and the write offset where that chunk started. */
  private pending: Uint8Array | null = null;
  private pendingOffset = 0;
  private writableRegistered = false;

  private dispatched = false;
  private body: RequestBodyStream | null = null;
  private clientPaused = false;

  /** Already sent to a second host after a failure: no further retry. */
  private retried = false;

  constructor(
    private readonly host: ExchangeHost,
    readonly res: UwsResponse,
    readonly ctx: RequestContext,
    private pool: Pool,
    private readonly options: Dispatcher.DispatchOptions,
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
    const body = (this.body = new RequestBodyStream(this));
    for (const chunk of chunks) body.push(chunk);
    // The stream's first read resumes the socket (onBodyWanted).
    this.clientPaused = paused;
    this.dispatch(body);
  }

  private dispatch(body: Buffer | RequestBodyStream | null): void {
    this.dispatched = true;
    this.options.body = body;
    this.pool.dispatch(this.options, this);
  }

  // ---- client side ---------------------------------------------------------------------------

  onClientAborted(): void {
    if (this.ended) return;
    this.ended = true;
    this.clientGone = true;
    this.receiving = false;
    if (!this.headWritten) this.ctx.status = 499;
    this.stopUpstream(CLIENT_GONE);
    this.body?.destroy(CLIENT_GONE);
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
    const copy = length > 0 ? Buffer.from(new Uint8Array(chunk)) : null;
    if (copy !== null) this.ctx.capture?.addRequestChunk(copy);
    if (!this.dispatched) {
      if (isLast) {
        // The whole body came with the head: forward it as one buffer, no stream needed.
        this.dispatch(copy);
        return;
      }
      this.body = new RequestBodyStream(this);
      if (copy !== null) this.body.push(copy);
      this.dispatch(this.body);
      return;
    }
    const body = this.body;
    if (body === null || body.destroyed) return;
    if (copy !== null && !body.push(copy) && !isLast) {
      this.clientPaused = true;
      this.res.pause();
    }
    if (isLast) body.push(null);
  }

  onBodyWanted(): void {
    if (!this.clientPaused || this.ended) return;
    this.clientPaused = false;
    this.res.resume();
  }

  /** The client did not send its whole request within timeouts.clientRequestMs. */
  onClientTooSlow(): void {
    if (this.ended || !this.receiving) return;
    this.answerItself(408, 'the request was not received in time');
  }

  // ---- undici handler ------------------------------------------------------------------------

  onConnect(abort: (err?: Error) => void): void {
    this.upstreamAbort = abort;
    if (this.upstreamSettled) abort(this.clientGone ? CLIENT_GONE : GATEWAY_ANSWERED);
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    if (statusCode < 200 || this.upstreamSettled) return true;
    this.ctx.status = statusCode;
    this.resumeUpstream = resume;
    if (statusCode >= 500) this.breakerFailure();
    else this.host.breakers.onSuccess(this.ctx.upstream!, this.ctx.routeId);
    if (this.ended) return true;

    this.scanUpstreamHeaders(rawHeaders);
    const observers = this.ctx.observers;
    if (observers !== null) {
      if (statusCode >= 500 && this.substituted(statusCode)) return true;
      const headers = this.endToEndHeaders(rawHeaders);
      for (let i = observers.length - 1; i >= 0; i--) observers[i].onHead(statusCode, headers);
    }
    this.pendingHead = rawHeaders;
    if (this.headersOnly || statusCode === 204 || statusCode === 304) {
      this.mode = BodyMode.None;
      corkTarget = this;
      this.res.cork(corkedHeadOnly);
      if (this.ctx.headAsGet) {
        // The GET's body is not wanted: drain a small one to keep the connection, abort a big one.
        const length = this.responseContentLength;
        if (length < 0 || length > HEAD_DRAIN_LIMIT) this.stopUpstream(HEAD_BODY_DROPPED);
      }
      return true;
    }
    if (this.responseContentLength >= 0) {
      this.mode = BodyMode.Sized;
      this.totalSize = this.responseContentLength;
    } else {
      this.mode = BodyMode.Chunked;
    }
    // Small answers arrive as headers, data and completion in one tick: send them in one write.
    queueHead(this);
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.ended || this.upstreamSettled || this.mode === BodyMode.None) return true;
    const observers = this.ctx.observers;
    if (observers !== null) for (let i = observers.length - 1; i >= 0; i--) observers[i].onData(chunk);
    this.ctx.bytesOut += chunk.length;
    corkTarget = this;
    corkChunk = chunk;
    this.res.cork(corkedBodyChunk);
    corkChunk = EMPTY;
    return corkWriteOk;
  }

  onComplete(): void {
    this.upstreamComplete = true;
    this.upstreamSettled = true;
    this.upstreamAbort = null;
    if (this.ended) return;
    // A Sized chunk still draining: onWritable ends the response once the rest is written.
    if (this.pending !== null) return;
    corkTarget = this;
    this.res.cork(corkedFinish);
  }

  onError(err: Error): void {
    const weStoppedIt = this.upstreamSettled;
    this.upstreamSettled = true;
    this.upstreamAbort = null;
    if (weStoppedIt || this.clientGone) return;
    const failure = classifyForwardError(err);
    if (failure.upstreamFault) this.breakerFailure();
    if (!this.ended && this.mayRetry(failure) && this.retryElsewhere(failure)) return;
    this.body?.destroy();
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

  // ---- response observers (middleware watching the answer, src/proxy/request-context.ts) ---------

  /** Asks the observers for content to send instead of a failed answer; writes it when one offers. */
  private substituted(status: number): boolean {
    const observers = this.ctx.observers!;
    for (let i = observers.length - 1; i >= 0; i--) {
      const answer = observers[i].substitute(status);
      if (answer === null) continue;
      this.stopUpstream(GATEWAY_ANSWERED);
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
    this.ctx.bytesOut = writeContent(this.res, answer.status, answer.headers, answer.body, {
      via: this.host.via,
      headersOnly: this.headersOnly,
      closeConnection: this.receiving || this.host.closing,
      headers: this.ctx.responseHeaders,
    });
    this.report();
  }

  /** The headers writeHead passes on, as strings (flat, names lower-case): built only for observers. */
  private endToEndHeaders(raw: Buffer[]): string[] {
    const named = this.upstreamConnection === null ? null : connectionNamedHeaders(this.upstreamConnection);
    const out: string[] = [];
    for (let i = 0; i < raw.length; i += 2) {
      if (classifyResponseHeader(raw[i]) !== ResponseHeader.Pass) continue;
      const name = raw[i].toString('latin1').toLowerCase();
      if (named === null || !named.includes(name)) out.push(name, raw[i + 1].toString('latin1'));
    }
    return out;
  }

  // ---- retry on another host (issue 9: a dead host of two must not fail half the requests) -----

  /**
   * Once, before any of the answer reached the client, and only with a body we still hold whole (a
   * streamed one was consumed by the failed attempt).
   */
  private mayRetry(failure: ForwardFailure): boolean {
    if (this.retried || this.headWritten || this.pendingHead !== null || failure.retry === 'never') return false;
    if (this.options.body !== null && !Buffer.isBuffer(this.options.body)) return false;
    return failure.retry === 'unsent' || isIdempotent(this.options.method);
  }

  private retryElsewhere(failure: ForwardFailure): boolean {
    const next = this.host.retryTarget(this, failure);
    if (next === null) return false;
    this.retried = true;
    this.ctx.upstream = next;
    this.pool = this.host.poolFor(next);
    this.upstreamSettled = false;
    this.upstreamComplete = false;
    this.upstreamAbort = null;
    this.resumeUpstream = null;
    this.breakerFailed = false;
    this.ctx.status = 0;
    this.pool.dispatch(this.options, this);
    return true;
  }

  // ---- writing to the client (always inside res.cork) -----------------------------------------

  /** Corked: status line and upstream headers (hop-by-hop dropped, Via appended). */
  writeHead(): void {
    const res = this.res;
    const raw = this.pendingHead!;
    this.pendingHead = null;
    this.headWritten = true;
    res.writeStatus(statusLine(this.ctx.status));
    const named = this.upstreamConnection === null ? null : connectionNamedHeaders(this.upstreamConnection);
    // uWS frames Sized/Chunked bodies itself; headers-only answers carry the upstream's length.
    const withLength = this.mode === BodyMode.None && this.ctx.status !== 204;
    const pass = this.passHeaders;
    const lengths = withLength ? this.lengthHeaders : 0;
    // At most one Content-Length goes out, whatever the upstream repeated.
    let lengthWritten = false;
    for (let i = 0, k = 0; i < raw.length; i += 2, k++) {
      let passes: boolean;
      let isLength: boolean;
      if (k < HEADER_BITS) {
        const bit = 1 << k;
        passes = (pass & bit) !== 0;
        isLength = (lengths & bit) !== 0;
      } else {
        // Past the masks: classified again here (the test with 45 headers reaches this path).
        const kind = classifyResponseHeader(raw[i]);
        passes = kind === ResponseHeader.Pass;
        isLength = withLength && kind === ResponseHeader.ContentLength;
      }
      if (passes) {
        if (named === null || !named.includes(raw[i].toString('latin1').toLowerCase())) res.writeHeader(raw[i], raw[i + 1]);
      } else if (isLength && !lengthWritten) {
        lengthWritten = true;
        res.writeHeader(raw[i], raw[i + 1]);
      }
    }
    res.writeHeader('via', this.upstreamVia === null ? this.host.via : `${this.upstreamVia.toString('latin1')}, ${this.host.via}`);
    const added = this.ctx.responseHeaders;
    if (added !== null) for (let i = 0; i < added.length; i += 2) res.writeHeader(added[i], added[i + 1]);
    if (this.host.closing || this.receiving) res.writeHeader('connection', 'close');
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

  /** Corked: one upstream body chunk. False when the client is behind (the upstream is then paused). */
  writeBodyChunk(chunk: Buffer): boolean {
    const res = this.res;
    if (this.pendingHead !== null) this.writeHead();
    if (this.mode === BodyMode.Sized) {
      // uWS's write offset before this chunk: every earlier chunk was taken whole (a partly taken one
      // pauses the upstream until onWritable has written the rest), so it is the body sent before it.
      const offset = this.ctx.bytesOut - chunk.length;
      const [ok, done] = res.tryEnd(chunk, this.totalSize);
      if (done) {
        this.onClientResponseEnded();
        return true;
      }
      if (ok) return true;
      this.pending = chunk;
      this.pendingOffset = offset;
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
      // Fewer bytes than the upstream's Content-Length (undici normally refuses this): a broken answer.
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
    this.resumePausedUpstream();
    return true;
  }

  // ---- helpers -------------------------------------------------------------------------------

  /** One pass over the upstream's headers: framing, Via, Connection, and what writeHead will pass on. */
  private scanUpstreamHeaders(raw: Buffer[]): void {
    let contentLength = -1;
    let sawLength = false;
    let pass = 0;
    let lengths = 0;
    for (let i = 0, k = 0; i < raw.length; i += 2, k++) {
      const kind = classifyResponseHeader(raw[i]);
      const bit = k < HEADER_BITS ? 1 << k : 0;
      if (kind === ResponseHeader.Pass) {
        pass |= bit;
      } else if (kind === ResponseHeader.ContentLength) {
        lengths |= bit;
        // The first one counts (what undici framed the body by).
        if (!sawLength) {
          sawLength = true;
          contentLength = parseDigits(raw[i + 1]);
        }
      } else if (kind === ResponseHeader.Via) {
        this.upstreamVia = raw[i + 1];
      } else if (kind === ResponseHeader.Connection && !isPlainConnectionValue(raw[i + 1])) {
        // Every Connection header names hop-by-hop headers, not just the last one.
        const value = raw[i + 1].toString('latin1');
        this.upstreamConnection = this.upstreamConnection === null ? value : `${this.upstreamConnection}, ${value}`;
      }
    }
    this.responseContentLength = contentLength;
    // Bits cover the first HEADER_BITS headers; writeHead classifies any later ones itself.
    this.passHeaders = pass;
    this.lengthHeaders = lengths;
  }

  private onClientResponseEnded(): void {
    this.ended = true;
    this.completed = true;
    this.report();
  }

  private resumePausedUpstream(): void {
    if (!this.upstreamPaused) return;
    this.upstreamPaused = false;
    this.resumeUpstream?.();
  }

  private awaitWritable(): void {
    if (this.writableRegistered) return;
    this.writableRegistered = true;
    this.res.onWritable((offset) => this.onWritable(offset));
  }

  /** Before ending the response: a paused client socket would never read the rest of its body. */
  private releaseClientBody(): void {
    if (!this.clientPaused) return;
    this.clientPaused = false;
    this.res.resume();
  }

  /** Answers with a problem of the gateway's own, stopping the upstream request if any. */
  private answerItself(status: number, detail: string): void {
    this.stopUpstream(GATEWAY_ANSWERED);
    this.body?.destroy();
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

  private stopUpstream(reason: Error): void {
    if (this.upstreamSettled) return;
    this.upstreamSettled = true;
    const abort = this.upstreamAbort;
    this.upstreamAbort = null;
    // Not connected yet: onConnect aborts as soon as undici gets that far.
    abort?.(reason);
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
        if (this.completed) observers[i].onEnd();
        else observers[i].onAbort();
      }
    }
    this.host.exchangeDone(this);
  }

  hasPendingHead(): boolean {
    return this.pendingHead !== null && !this.ended;
  }
}

// uWS's cork takes a callback; these module-level trampolines spare a closure per call.
let corkTarget: Exchange;
let corkChunk: Buffer | Uint8Array = EMPTY;
let corkWriteOk = true;
let problemDetail = '';

function corkedBodyChunk(): void {
  corkWriteOk = corkTarget.writeBodyChunk(corkChunk as Buffer);
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
  corkTarget.writeHead();
}

const headQueue: Exchange[] = [];
let headFlushQueued = false;

/** Writes the head at the end of this tick unless body bytes or completion carried it out first. */
function queueHead(exchange: Exchange): void {
  headQueue.push(exchange);
  if (headFlushQueued) return;
  headFlushQueued = true;
  queueMicrotask(flushHeads);
}

function flushHeads(): void {
  headFlushQueued = false;
  for (let i = 0; i < headQueue.length; i++) {
    const exchange = headQueue[i];
    if (!exchange.hasPendingHead()) continue;
    corkTarget = exchange;
    exchange.res.cork(corkedHead);
  }
  headQueue.length = 0;
}
