/**
 * The respond adapter for uWebSockets.js: one request's client side (ClientSide) on a uWS response.
 * Writes local replies and streams upstream answers within uWS's cork budget (src/http/cork-budget.ts),
 * with tryEnd backpressure; reads the request body with pause/resume.
 *
 * A streamed answer's header names and values and its body chunks are views of the upstream
 * connection's read buffer, valid until reading goes on (see UpstreamHandler): the head is written
 * within the same read (with the first body bytes, or at the end of the read's microtasks), and a
 * chunk uWS could not take whole is held only while the upstream is paused.
 */
import { CHUNK_PIECE_BYTES, CORK_BUFFER_BYTES, CORK_SLACK_BYTES, fitsInCork, headerBytes, writeHeaders } from '../../http/cork-budget.js';
import { withoutNames } from '../../http/header-list.js';
import { writeContent, writeProblem } from '../../http/problem-json.js';
import { statusLine, statusLineBytes } from '../../http/status-line.js';
import { writeBuiltinAnswer } from '../../builtins/write-answer.js';
import { closeAfterThisRead, CloseWhenIdle, endEmptyBodyByHand, endHeadByHand, lingeringClose, RecordedReply, sendClosing, writeLastChunk } from './closing-reply.js';
import type { UwsResponse } from '../../native/uws-types.js';
import type { LocalReply } from '../../exchange/answer.js';
import type { ClientEvents, ClientSide, ResponseStream } from '../../exchange/client.js';
import type { RequestContext } from '../../exchange/context.js';
import type { ResponseHead } from '../../upstream/response-parser.js';
import { isDateHeader, isViaHeader } from '../../proxy/headers.js';

/** Per worker: what every answer carries and whether connections should close. */
export interface ClientSettings {
  /** `1.1 <name>`, the gateway's Via entry. */
  readonly via: string;
  /** The same, as bytes (uWS copies a Buffer as it is; a string it converts first). */
  readonly viaBytes: Buffer;
  /** Shutting down: ask clients to close their connections. */
  readonly closing: boolean;
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

export class UwsClient implements ClientSide {
  ended = false;
  headSent = false;
  receiving: boolean;

  private completed = false;
  private events: ClientEvents | null = null;
  private paused = false;
  private stream: ResponseStream | null = null;
  /** The upstream's head, waiting to be written together with the first body bytes. */
  private pendingHead: ResponseHead | null = null;
  /** The head's status line and headers went out already, in corks of their own (spillHead). */
  private headSpilled = false;
  /**
   * A chunked answer's head held past the read that brought it (holdHead): status line, headers and
   * Via as writeStatus takes them, copied out of the read buffer. It goes out with the first body
   * bytes or the end; until then a failure is answered as if no answer had come.
   */
  private heldHead: Buffer | null = null;
  /** A chunked answer's head that may need spilling (mayOverflowCork): spilled before its first write. */
  private bigHead = false;
  /** holdHead ran: the head waited past its read. */
  private headHeld = false;
  private mode = BodyMode.Chunked;
  private totalSize = 0;
  /** Part of a Sized chunk uWS did not take yet, and the write offset where that chunk started. */
  private pending: Uint8Array | null = null;
  private pendingOffset = 0;
  /** finish() came while a chunk was still draining: onWritable ends the answer. */
  private finishWhenDrained = false;
  private writableRegistered = false;
  /** A headers-only answer that must close: closed after its cork. */
  private closeAfterHead = false;
  /**
   * An answer after which the connection must close, that one end(body, true) cannot carry: its body
   * goes out chunked and the response is never ended, its last chunk written by hand (closing-reply.ts).
   */
  private endsByHand = false;
  /** The upstream's Content-Length of an answer ended by hand; -1 when it came chunked. */
  private declaredSize = -1;
  /** An answer ended by hand: its connection is closed once idle. */
  private idleClose: CloseWhenIdle | null = null;
  /** The client may still be sending the request body (its last chunk has not been read). */
  private bodyUnread: boolean;
  /** A closing answer went out while the body still came: the rest is read and dropped, then the connection closed. */
  private linger: CloseWhenIdle | null = null;

  constructor(
    readonly res: UwsResponse,
    readonly ctx: RequestContext,
    private readonly settings: ClientSettings,
  ) {
    this.receiving = ctx.hasBody;
    this.bodyUnread = ctx.hasBody;
    // From the start, not from watch(): a local reply that closes needs to know when the body has ended.
    if (ctx.hasBody) res.onData((chunk, isLast) => this.onData(chunk, isLast));
  }

  get streaming(): boolean {
    return this.headSent || this.pendingHead !== null;
  }

  // ---- request body (RequestBodySource) ------------------------------------------------------

  watch(events: ClientEvents): void {
    const watched = this.events !== null;
    this.events = events;
    if (watched) return;
    this.res.onAborted(() => this.onAborted());
  }

  private onAborted(): void {
    if (this.ended) return;
    this.ended = true;
    this.receiving = false;
    this.events?.onClientAborted();
  }

  private onData(chunk: ArrayBuffer, isLast: boolean): void {
    if (isLast) {
      this.receiving = false;
      this.bodyUnread = false;
    }
    if (this.ended) {
      if (this.linger === null) return;
      if (isLast) this.linger.closeSoon();
      else this.linger.touch();
      return;
    }
    this.events?.onClientData(chunk, isLast);
  }

  /**
   * Closes the connection after a closing answer: at once when nothing more of the request can come,
   * else once the client has stopped sending (lingeringClose). Not for a 408: that client was not sending.
   */
  private closeConnection(res: UwsResponse): void {
    if (!this.bodyUnread || this.ctx.status === 408) res.close();
    else this.linger = lingeringClose(res);
  }

  pause(): void {
    if (this.paused || this.ended) return;
    this.paused = true;
    this.res.pause();
  }

  /** Also before ending the response: a paused socket would never read the rest. */
  resume(): void {
    if (!this.paused || this.ended) return;
    this.paused = false;
    this.res.resume();
  }

  // ---- local replies ---------------------------------------------------------------------------

  reply(reply: LocalReply, close: boolean): void {
    this.pendingHead = null;
    this.heldHead = null;
    const ctx = this.ctx;
    if (close || this.settings.closing || ctx.closeRequested || ctx.libraryCloses) {
      const recorded = new RecordedReply();
      this.writeReply(reply, true, recorded);
      sendClosing(this.res, recorded, (res) => this.closeConnection(res));
      return;
    }
    if (handlerResponse === this.res) {
      // uWS corks the socket around its request handler: a reply made before the handler returns
      // writes at once, without cork()'s round trip from JavaScript to uWS and back (callgrind, a
      // cache hit of bench:instructions: 42,305 to 41,370 instructions in uWS's handler).
      this.writeReply(reply, false);
      return;
    }
    replyTarget = this;
    replyWhat = reply;
    this.res.cork(corkedReply);
    replyWhat = null;
  }

  /**
   * Corked, or into a RecordedReply (`closeConnection`: see closing-reply.ts): see reply().
   */
  writeReply(reply: LocalReply, closeConnection: boolean, res: UwsResponse = this.res): void {
    const ctx = this.ctx;
    const settings = this.settings;
    const headersOnly = ctx.method === 'HEAD';
    const own = ctx.responseHeaders;
    this.resume();
    this.ended = true;
    ctx.status = reply.kind === 'builtin' ? reply.answer.status : reply.kind === 'options' ? 200 : reply.status;
    switch (reply.kind) {
      case 'problem': {
        const headers = reply.headers === undefined ? own : own === null ? reply.headers : [...reply.headers, ...own];
        ctx.bytesOut = writeProblem(res, reply.status, reply.detail, { allow: reply.allow, via: settings.via, headersOnly, closeConnection, headers });
        return;
      }
      case 'content': {
        // A stored answer (a cache hit) keeps the upstream's headers: those withheld from the client go here too.
        const hidden = ctx.hiddenResponseHeaders;
        let headers = reply.headers;
        let block = reply.block;
        if (hidden !== null && block?.keeps !== hidden) {
          headers = withoutNames(headers, hidden);
          // Its encoded head holds for the answer's headers as they are, not for a selection of them.
          if (headers !== reply.headers) block = undefined;
          else if (block !== undefined) block.keeps = hidden;
        }
        ctx.bytesOut = writeContent(res, reply.status, headers, reply.body, { via: settings.via, headersOnly, closeConnection, headers: own, block });
        return;
      }
      case 'builtin':
        // A HEAD has no body left unread: only a closing gateway or the client asks for the connection to close.
        ctx.bytesOut = writeBuiltinAnswer(res, reply.answer, headersOnly, closeConnection, own);
        return;
      case 'options':
        res.writeStatus(statusLine(200));
        res.writeHeader('allow', reply.allow);
        res.writeHeader('via', settings.via);
        if (own !== null) writeHeaders(res, own);
        res.end('', closeConnection);
        ctx.bytesOut = 0;
        return;
    }
  }

  // ---- streamed upstream answers ---------------------------------------------------------------

  startStream(stream: ResponseStream, status: number, head: ResponseHead): boolean {
    this.stream = stream;
    this.pendingHead = head;
    const bigHead = mayOverflowCork(head);
    if (this.ctx.method === 'HEAD' || status === 204 || status === 304) {
      if (bigHead) this.spillHead(head);
      this.mode = BodyMode.None;
      corkTarget = this;
      this.res.cork(corkedHeadOnly);
      if (this.closeAfterHead) closeAfterThisRead(this.res, (res) => this.closeConnection(res));
      return true;
    }
    const length = head.contentLength;
    if (length >= 0) {
      if (bigHead) this.spillHead(head);
      this.mode = BodyMode.Sized;
      this.totalSize = length;
    } else {
      // Spilled only when the first body bytes or the end come: until then nothing is on the wire.
      this.bigHead = bigHead;
      this.mode = BodyMode.Chunked;
    }
    // The head goes out with the first body bytes (one write for a small answer). When none follow
    // in this read, a sized head goes out at the end of the read (its views are valid until then);
    // a chunked one is held until its first body bytes or its end (uWS would send it without its
    // blank line, which only the first chunk completes: see native-notes.md).
    if (!head.bodyFollows) queueHead(this);
    return false;
  }

  body(chunk: Buffer): boolean {
    if (this.ended || this.mode === BodyMode.None) return true;
    if (this.bigHead) this.spillLate();
    this.ctx.bytesOut += chunk.length;
    corkTarget = this;
    corkChunk = chunk;
    corkOversized = false;
    this.res.cork(corkedBodyChunk);
    corkChunk = EMPTY;
    if (corkOversized) return this.writeChunkPieces(chunk);
    return corkWriteOk;
  }

  finish(): void {
    if (this.ended) return;
    // A Sized chunk still draining: onWritable ends the response once the rest is written.
    if (this.pending !== null) {
      this.finishWhenDrained = true;
      return;
    }
    if (this.bigHead) this.spillLate();
    corkTarget = this;
    this.res.cork(corkedFinish);
  }

  cut(): void {
    if (this.ended) return;
    this.ended = true;
    this.receiving = false;
    this.heldHead = null;
    this.streamEnded(false);
    // onAborted runs synchronously from close(); `ended` makes it a no-op.
    this.res.close();
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
    this.awaitWritable();
    return false;
  }

  /**
   * Corked: status line and upstream headers (hop-by-hop already dropped by the client; Date dropped,
   * Via appended). Returns the bytes written (the cork budget).
   */
  writeHead(connectionHeader = true): number {
    const res = this.res;
    const head = this.pendingHead!;
    this.pendingHead = null;
    this.headSent = true;
    const ctx = this.ctx;
    let bytes: number;
    const held = this.heldHead;
    // uWS frames Sized/Chunked bodies itself; a headers-only answer carries the length a GET would have had.
    const declaredLength = this.mode === BodyMode.None && ctx.status !== 204 && head.declaredLength >= 0;
    let added = ctx.responseHeaders;
    if (this.headSpilled) {
      bytes = 0;
    } else if (held !== null) {
      this.heldHead = null;
      res.writeStatus(held);
      bytes = held.length + 2;
    } else {
      let length = fillHeadBlock(statusLineBytes(ctx.status), head, this.settings.viaBytes);
      // The middleware's headers (X-Request-Id) ride in the block too when nothing comes between.
      if (added !== null && !declaredLength) {
        const withAdded = appendHeaderLines(length, added);
        if (withAdded !== -1) {
          length = withAdded;
          added = null;
        }
      }
      bytes = writeHeadBlock(res, length);
    }
    if (declaredLength) res.writeHeader(CONTENT_LENGTH, String(head.declaredLength));
    if (added !== null) {
      for (let i = 0; i < added.length; i += 2) {
        const name = added[i]!;
        const value = added[i + 1]!;
        res.writeHeader(name, value);
        bytes += headerBytes(name, value);
      }
    }
    // A client's Connection: close is answered in kind. uWS closes by itself for the plain form; for
    // "close" among other options, a chunked request body, one still unread or a draining gateway, an
    // answer ended by one end(body, true) closes (writeBodyChunk) and any other is ended by hand.
    if (connectionHeader && this.wantsClose()) res.writeHeader('connection', 'close');
    return bytes;
  }

  private wantsClose(): boolean {
    return this.settings.closing || this.receiving || this.ctx.closeRequested;
  }

  /** The connection must close after this answer and uWS would not close it by itself. */
  private mustClose(): boolean {
    return !this.ctx.libraryCloses && this.wantsClose();
  }

  /** Before any body byte is written: the body goes out chunked, and the answer is ended by hand. */
  private switchToEndByHand(): void {
    this.endsByHand = true;
    if (this.mode === BodyMode.Sized) {
      this.declaredSize = this.totalSize;
      this.mode = BodyMode.Chunked;
    }
  }

  /**
   * Corked: the last chunk, by hand (or the end of the head, for an empty body: uWS completes a
   * chunked head with the first chunk only, and writes Date with it). uWS reads on from this
   * connection, but a request it parses while the answer is unfinished makes it close the connection
   * without handing the request on; the client, told Connection: close, closes it, or CloseWhenIdle.
   */
  private endByHand(): void {
    const res = this.res;
    this.ended = true;
    this.completed = true;
    if (this.ctx.bytesOut === 0) endEmptyBodyByHand(res);
    else writeLastChunk(res);
    this.idleClose = new CloseWhenIdle(res);
    this.streamEnded(true);
  }

  /**
   * Not corked: a head too large to share one cork with what follows it (src/http/cork-budget.ts)
   * goes out now, in corks of at most HEAD_PIECE_BYTES each, cut at line ends: the status line and
   * the first headers by writeStatus, the others by writeHeader. writeHead then adds only the rest
   * (Content-Length of a headers-only answer, the middleware's headers, Connection: close) in the
   * cork that carries the body. Heads this large are rare (the upstream client admits 16 KiB).
   */
  private spillHead(head: ResponseHead): void {
    // fillHeadBlock first: it may grow headBlock.
    const length = fillHeadBlock(statusLineBytes(this.ctx.status), head, this.settings.viaBytes);
    this.spillBlock(headBlock, length);
  }

  /** A chunked answer's large head, before its first write: from the held copy once its read is over. */
  private spillLate(): void {
    this.bigHead = false;
    if (this.pendingHead === null) return;
    const held = this.heldHead;
    if (held === null) {
      this.spillHead(this.pendingHead);
      return;
    }
    this.spillBlock(held, held.length);
    if (this.headSpilled) this.heldHead = null;
  }

  /** spillHead for the head block `block` of `length` bytes. */
  private spillBlock(block: Buffer, length: number): void {
    let rest = 0;
    const added = this.ctx.responseHeaders;
    if (added !== null) for (let i = 0; i < added.length; i += 2) rest += headerBytes(added[i]!, added[i + 1]!);
    if (length + STATUS_FRAMING + rest + HEAD_REST_BYTES <= HEAD_PIECE_BYTES) return;
    this.headSpilled = true;
    const res = this.res;
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
    const close = this.wantsClose();
    this.writeHead(!close);
    this.resume();
    this.ended = true;
    this.completed = true;
    if (close) {
      // endWithoutBody never closes the connection (src/lifecycle/uws/closing-reply.ts): the head is
      // ended by hand, and the connection is closed once the cork is sent (closeAfterThisRead).
      this.res.writeHeader('connection', 'close');
      endHeadByHand(this.res);
      this.closeAfterHead = true;
    } else {
      // No argument: see native-notes.md on endWithoutBody in uWS 20.30.
      this.res.endWithoutBody();
    }
    this.streamEnded(true);
  }

  /**
   * Corked: one upstream body chunk. False when the client is behind (the upstream is then paused).
   * A chunked one too large for this cork is left to writeChunkPieces (corkOversized).
   */
  writeBodyChunk(chunk: Uint8Array): boolean {
    const res = this.res;
    if (this.mode !== BodyMode.Sized) {
      if (this.pendingHead !== null && !this.endsByHand && this.mustClose()) this.switchToEndByHand();
      return this.writeChunk(chunk, this.pendingHead !== null ? this.writeHead() : 0);
    }
    // uWS's write offset before this chunk: every earlier chunk was taken whole (a partly taken one
    // pauses the upstream until onWritable has written the rest), so it is the body sent before it.
    const offset = this.ctx.bytesOut - chunk.length;
    const whole = offset === 0 && chunk.length === this.totalSize;
    // Decided with the head: after it, the answer goes on as it began.
    const mustClose = this.pendingHead !== null && this.mustClose();
    // One end() that carries head and body can close a connection uWS keeps open (end(body, true)
    // writes Connection: close itself); uWS closes by itself for the client's plain "close".
    const endCloses = whole && mustClose && !this.receiving;
    const head = this.pendingHead !== null ? this.writeHead(!endCloses) : 0;
    if (whole && fitsInCork(head, chunk.length) && (endCloses || !mustClose)) {
      // The whole body in one chunk (most answers): end() takes it all at once (buffering what the
      // socket cannot take now), without tryEnd's result array.
      res.end(chunk, endCloses);
      this.responseComplete();
      return true;
    }
    if (mustClose) {
      if (endCloses) res.writeHeader('connection', 'close');
      this.switchToEndByHand();
      return this.writeChunk(chunk, head);
    }
    const [ok, done] = res.tryEnd(chunk, this.totalSize);
    if (done) {
      this.responseComplete();
      return true;
    }
    if (ok) return true;
    // uWS did not take all of it: the view stays valid while the upstream is paused (see the file comment).
    this.pending = chunk;
    this.pendingOffset = offset;
    this.awaitWritable();
    return false;
  }

  /** Corked: a chunk of a body uWS sends chunked (`head`: the bytes of the head written with it). */
  private writeChunk(chunk: Uint8Array, head: number): boolean {
    if (!fitsInCork(head, chunk.length)) {
      corkOversized = true;
      return true;
    }
    if (chunk.length === 0) return true;
    if (this.res.write(chunk)) return true;
    this.awaitWritable();
    return false;
  }

  /** Corked: the upstream answer is complete. */
  finishResponse(): void {
    if (this.ended) return;
    const res = this.res;
    // A held head is decided here as flushHead decides a sized head it writes ahead.
    if (this.headHeld && this.pendingHead !== null && !this.endsByHand && this.mustClose()) this.switchToEndByHand();
    if (this.endsByHand) {
      if (this.pendingHead !== null) this.writeHead();
      this.resume();
      // Fewer bytes than the upstream's Content-Length: the last chunk would make it look whole.
      if (this.declaredSize >= 0 && this.ctx.bytesOut !== this.declaredSize) this.cut();
      else this.endByHand();
      return;
    }
    if (this.mode === BodyMode.Sized && this.pendingHead !== null && this.totalSize === 0) {
      // An empty sized body: one end() with the head, as writeBodyChunk ends a whole body.
      this.resume();
      this.writeBodyChunk(EMPTY);
      if (this.endsByHand) this.endByHand();
      return;
    }
    if (this.pendingHead !== null) this.writeHead();
    this.resume();
    if (this.mode === BodyMode.Sized) {
      const [, done] = res.tryEnd(EMPTY, this.totalSize);
      if (done) {
        this.responseComplete();
        return;
      }
      // Fewer bytes than the upstream's Content-Length (the client refuses such answers): a broken answer.
      this.cut();
      return;
    }
    this.ended = true;
    this.completed = true;
    res.end();
    this.streamEnded(true);
  }

  private onWritable(offset: number): boolean {
    if (this.ended) {
      // Ended by hand: with this handler registered, uWS sends what it still holds only when written
      // to, and an empty cork does that.
      if (this.idleClose !== null) {
        this.idleClose.touch();
        this.res.cork(noop);
      }
      return true;
    }
    const pending = this.pending;
    if (pending !== null) {
      const [ok, done] = this.res.tryEnd(pending.subarray(offset - this.pendingOffset), this.totalSize);
      if (done) {
        this.pending = null;
        this.responseComplete();
        this.stream?.onClientWritable();
        return true;
      }
      if (!ok) return false;
      this.pending = null;
      if (this.finishWhenDrained) {
        this.finishResponse();
        return true;
      }
    }
    // The upstream may go on reading right here (its data and end come from inside onClientWritable).
    this.stream?.onClientWritable();
    return true;
  }

  private responseComplete(): void {
    this.ended = true;
    this.completed = true;
    this.streamEnded(true);
  }

  private streamEnded(completed: boolean): void {
    const stream = this.stream;
    if (stream === null) return;
    this.stream = null;
    this.receiving = false;
    stream.onResponseEnded(completed && this.completed);
  }

  private awaitWritable(): void {
    if (this.writableRegistered) return;
    this.writableRegistered = true;
    this.res.onWritable((offset) => {
      try {
        return this.onWritable(offset);
      } catch (err) {
        process.emitWarning(err instanceof Error ? err : new Error(String(err)), 'DataPlaneError');
        this.cut();
        return true;
      }
    });
  }

  /** The queued head goes out now unless body bytes or the end carried it out already. */
  flushHead(): void {
    if (this.pendingHead === null || this.ended) return;
    // A sized answer after which the connection must close goes out chunked and ended by hand
    // (writeBodyChunk): its head is held as a chunked one is, since a head written ahead with uWS's
    // tryEnd carries Content-Length and its blank line, and the chunked body would follow it.
    if (this.mode === BodyMode.Sized && this.mustClose()) this.switchToEndByHand();
    if (this.mode === BodyMode.Chunked) {
      // A spilled head is on uWS's side already (spillHead): nothing to hold.
      if (!this.headSpilled) this.holdHead(this.pendingHead);
      return;
    }
    corkTarget = this;
    try {
      this.res.cork(corkedHead);
    } catch (err) {
      process.emitWarning(err instanceof Error ? err : new Error(String(err)), 'DataPlaneError');
      this.cut();
    }
  }

  /**
   * A chunked answer's head, its read over and no body bytes yet: copied out of the read buffer (the
   * upstream reads on into it) and held. One copy per answer whose first chunk comes in a later read.
   */
  private holdHead(head: ResponseHead): void {
    const length = fillHeadBlock(statusLineBytes(this.ctx.status), head, this.settings.viaBytes);
    const held = Buffer.allocUnsafe(length);
    headBlock.copy(held, 0, 0, length);
    this.heldHead = held;
    this.headHeld = true;
  }

  /**
   * Corked: a sized head alone, its body still to come. uWS completes the head on the wire
   * (Content-Length and the blank line) by an empty tryEnd. (A chunked head is held instead: uWS
   * completes one with the first chunk only.)
   */
  writeHeadAhead(): void {
    this.writeHead();
    this.res.tryEnd(EMPTY, this.totalSize);
  }
}

/**
 * The status line, the upstream's headers and Via go to uWS in one writeStatus call: uWS writes
 * "HTTP/1.1 ", the bytes given, then CRLF, so "200 OK\r\nname: value\r\nvia: 1.1 gw" is the status line
 * followed by header lines, exactly what one writeHeader call per header would write. One native call
 * and no view per name and value instead of a call and two views per header (a GitHub-like answer has
 * 20-30 headers). Safe because the upstream client admitted only token names and values free of CR,
 * LF and NUL. Date is left out (uWS writes its own); the upstream's Via values come first in ours.
 * Writes headBlock's first `p` bytes (fillHeadBlock, then appendHeaderLines); returns the bytes written
 * (the cork budget).
 */
function writeHeadBlock(res: UwsResponse, p: number): number {
  // A view of the block's first p bytes: the last one again when the length is the same (an upstream's
  // answers to one route usually are, Date and Content-Length being left out).
  if (p !== headViewLength) {
    headView = new Uint8Array(headBlockArrayBuffer, headBlock.byteOffset, p);
    headViewLength = p;
  }
  res.writeStatus(headView);
  return p + 2;
}

/**
 * Appends "\r\n<name>: <value>" for each pair of `headers` to headBlock from `p`; returns the new
 * length, or -1 when a character is past ASCII (uWS writes a string's UTF-8 and replaces what is not
 * valid: such headers go to writeHeader as before) or the block has no room. What was written past `p`
 * then lies outside the block's length. callgrind: one writeHeader call with two strings costs about
 * 2,500 instructions (uWS makes a Utf8Value of each), X-Request-Id appended here about 1,500 (its name
 * line kept encoded, its value written by Buffer#write: a character loop from JavaScript cost more).
 */
function appendHeaderLines(p: number, headers: readonly string[]): number {
  const block = headBlock;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    const value = headers[i + 1]!;
    const start = nameLineOf(name);
    // Room for 3 bytes a character (the most UTF-8 takes for one): write() never stops short, so
    // that it writes as many bytes as there are characters exactly when they are all ASCII.
    if (start === null || p + start.length + 3 * value.length > block.length) return -1;
    block.set(start, p);
    p += start.length;
    const written = block.write(value, p, 'utf8');
    if (written !== value.length) return -1;
    p += written;
  }
  return p;
}

/** "\r\n<name>: " as bytes for an ASCII name, else null; the last few names kept (the middleware's are a handful). */
function nameLineOf(name: string): Buffer | null {
  if (name === lastName) return lastNameLine;
  let line = nameLines.get(name);
  if (line === undefined) {
    const bytes = Buffer.from(`\r\n${name}: `, 'utf8');
    line = bytes.length === name.length + 4 ? bytes : null;
    if (nameLines.size >= 64) nameLines.clear();
    nameLines.set(name, line);
  }
  lastName = name;
  lastNameLine = line;
  return line;
}
const nameLines = new Map<string, Buffer | null>();
let lastName = '';
let lastNameLine: Buffer | null = null;

/** Writes status line, headers and Via into headBlock (see writeHeadBlock); returns the length. */
function fillHeadBlock(statusLine: Buffer, head: ResponseHead, ourVia: Buffer): number {
  const source = head.source;
  const spans = head.spans;
  // Every upstream header counted whole (name, ": ", value, CRLF) covers what its Via value adds (", "
  // + value); copyBytes may write 3 bytes past the end.
  let size = statusLine.length + VIA_LINE.length + ourVia.length + 3;
  for (let i = 0; i < spans.length; i += 4) size += spans[i + 1]! - spans[i]! + spans[i + 3]! - spans[i + 2]! + 4;
  if (size > headBlock.length) growHeadBlock(Math.max(size, 2 * headBlock.length));
  const block = headBlock;
  const blockWords = headBlockWords;
  const words = head.sourceWords;
  const status = wordsOf(statusLine);
  let p = copyBytes(block, blockWords, 0, status.bytes, status.words, 0, statusLine.length);
  let vias = 0;
  for (let i = 0; i < spans.length; i += 4) {
    const nameStart = spans[i]!;
    const nameEnd = spans[i + 1]!;
    const nameLength = nameEnd - nameStart;
    if (nameLength === 4 && isDateHeader(source, nameStart)) continue;
    if (nameLength === 3 && isViaHeader(source, nameStart)) {
      vias++;
      continue;
    }
    blockWords.setUint16(p, CRLF_WORD, true);
    p = copyBytes(block, blockWords, p + 2, source, words, nameStart, nameEnd);
    blockWords.setUint16(p, COLON_SP_WORD, true);
    p = copyBytes(block, blockWords, p + 2, source, words, spans[i + 2]!, spans[i + 3]!);
  }
  if (vias > 0) {
    block.set(VIA_LINE, p);
    p += VIA_LINE.length;
    // Rare (another proxy upstream of us): the upstream's values, in order, before ours.
    for (let i = 0; i < spans.length; i += 4) {
      // An empty value adds no element (RFC 9110 5.6.1: a sender does not make empty list elements).
      if (spans[i + 1]! - spans[i]! !== 3 || !isViaHeader(source, spans[i]!) || spans[i + 2] === spans[i + 3]) continue;
      for (let j = spans[i + 2]!, end = spans[i + 3]!; j < end; j++) block[p++] = source[j]!;
      block[p++] = 0x2c;
      block[p++] = 0x20;
    }
    block.set(ourVia, p);
    return p + ourVia.length;
  }
  // "\r\nvia: " and ours in one copy.
  if (ourVia !== viaLineOf) {
    viaLineOf = ourVia;
    viaLine = padded(Buffer.concat([VIA_LINE, ourVia]));
  }
  return copyBytes(block, blockWords, p, viaLine.bytes, viaLine.words, 0, viaLine.length);
}

/** Bytes with 3 more after them, and a DataView of all: what copyBytes copies from a word at a time. */
interface Padded {
  readonly bytes: Buffer;
  readonly words: DataView;
  readonly length: number;
}

function padded(bytes: Buffer): Padded {
  const copy = Buffer.alloc(bytes.length + 3);
  bytes.copy(copy);
  return { bytes: copy, words: new DataView(copy.buffer, copy.byteOffset, copy.length), length: bytes.length };
}

/** Status lines (statusLineBytes keeps one Buffer per status), padded for copyBytes. */
const statusWords = new Map<Buffer, Padded>();
let lastStatusLine: Buffer | null = null;
let lastStatus: Padded | null = null;

function wordsOf(statusLine: Buffer): Padded {
  if (statusLine === lastStatusLine) return lastStatus!;
  let found = statusWords.get(statusLine);
  if (found === undefined) {
    found = padded(statusLine);
    // A status line not from statusLineBytes' cache (outside 100-999) is made per answer: not kept.
    if (statusWords.size < 1000) statusWords.set(statusLine, found);
  }
  lastStatusLine = statusLine;
  lastStatus = found;
  return found;
}

/**
 * source[start, end) to block at p; returns p + end - start. With the source's DataView, 4 bytes per
 * load and store, the last word reaching up to 3 bytes past `end`: every kept name and value has at
 * least that many bytes of its head after it (": ", the CRLF, the blank line), and what is written past
 * `end` is overwritten by what follows it or left outside the block's length. callgrind: a byte copied
 * 25 -> about 5 instructions.
 */
function copyBytes(block: Buffer, blockWords: DataView, p: number, source: Buffer, words: DataView | null, start: number, end: number): number {
  const length = end - start;
  if (words !== null && end + 3 <= source.length) {
    for (let i = 0; i < length; i += 4) blockWords.setUint32(p + i, words.getUint32(start + i, true), true);
  } else {
    for (let i = 0; i < length; i++) block[p + i] = source[start + i]!;
  }
  return p + length;
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
  return spans.length !== 0 && spans[spans.length - 1]! - spans[0]! > SMALL_HEAD_SPAN;
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
// Its ArrayBuffer (Buffer#buffer is a C++ getter), a DataView of it, and the last view writeHeadBlock gave uWS.
let headBlockArrayBuffer = headBlock.buffer;
let headBlockWords = new DataView(headBlockArrayBuffer, headBlock.byteOffset, headBlock.length);
let headView = new Uint8Array(0);
let headViewLength = -1;

function growHeadBlock(size: number): void {
  headBlock = Buffer.allocUnsafeSlow(size);
  headBlockArrayBuffer = headBlock.buffer;
  headBlockWords = new DataView(headBlockArrayBuffer, headBlock.byteOffset, headBlock.length);
  headViewLength = -1;
}

const VIA_LINE = Buffer.from('\r\nvia: ', 'latin1');
/** VIA_LINE and the Via value it was made for (ClientSettings.viaBytes: one per worker). */
let viaLine: Padded = { bytes: VIA_LINE, words: new DataView(VIA_LINE.buffer, VIA_LINE.byteOffset, VIA_LINE.length), length: VIA_LINE.length };
let viaLineOf: Buffer | null = null;
/** CRLF and ": " as little-endian 16-bit words. */
const CRLF_WORD = 0x0a0d;
const COLON_SP_WORD = 0x203a;

// uWS's cork takes a callback; these module-level trampolines spare a closure per call (one writer is
// corked at a time: cork runs its callback before it returns).
let corkTarget: UwsClient;
let corkChunk: Buffer | Uint8Array = EMPTY;
let corkWriteOk = true;
/** Set by writeBodyChunk: the chunk goes out in pieces, after the cork. */
let corkOversized = false;

function noop(): void {}
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
let replyTarget: UwsClient;
let replyWhat: LocalReply | null = null;

/**
 * The response whose uWS request handler is running (null outside one). uWS corks a connection's socket
 * while it parses and routes what arrived, so writes made inside the handler are corked already, and
 * uWS.js counts them as such (it warns about uncorked writes only outside). Only this response: another
 * response written while the handler runs is not the socket uWS corked.
 */
let handlerResponse: UwsResponse | null = null;

/** uWS's request handler for `res` began (see handlerResponse); handlerReturned() when it returns. */
export function handlerBegan(res: UwsResponse): void {
  handlerResponse = res;
}

export function handlerReturned(): void {
  handlerResponse = null;
}
function corkedReply(): void {
  replyTarget.writeReply(replyWhat!, false);
}
function corkedHead(): void {
  corkTarget.writeHeadAhead();
}

const headQueue: UwsClient[] = [];
let headFlushQueued = false;
/** A promise reaction is a microtask at about half the cost of queueMicrotask (no AsyncResource). */
const RESOLVED = Promise.resolve();

/**
 * Writes the head at the end of this tick unless body bytes or completion carried it out first. The
 * microtask runs before the upstream connection reads again, so the head's views are still valid.
 */
function queueHead(client: UwsClient): void {
  headQueue.push(client);
  if (headFlushQueued) return;
  headFlushQueued = true;
  void RESOLVED.then(flushHeads);
}

function flushHeads(): void {
  headFlushQueued = false;
  for (let i = 0; i < headQueue.length; i++) headQueue[i]!.flushHead();
  headQueue.length = 0;
}
