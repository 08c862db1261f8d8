/**
 * Local replies after which the connection must close, written so that uWS reads nothing more from
 * that connection.
 *
 * Why not end(body, true): uWebSockets.js 20.30 goes on parsing what follows a request in the same
 * read after it, hands that to the handler as the next request and answers it on the same connection,
 * which then stays open (native-notes.md, "What follows a closing answer"). Where the gateway closes
 * because the framing of a request is in doubt (two Content-Lengths, a trailer section uWS reads as
 * a request), that next "request" is one the client's proxy never saw: request smuggling. And
 * endWithoutBody (HEAD, 204, 304) never closes at all.
 *
 * What uWS does do: a request it parses while the previous answer on that connection is unfinished
 * makes it close the connection without handing the request on; and res.close() closes at once.
 * So the writers (problem+json, built-ins, cached content, OPTIONS) write into a RecordedReply, and
 * the recorded answer goes out in one writeStatus call, never ended, and the connection is closed
 * with res.close() once the read being handled is done with (see afterThisRead). uWS appends CRLF to what writeStatus is given, so the bytes
 * end one CRLF short: the blank line after the head, or the end of the last chunk of a body sent
 * chunked.
 *
 * A body too large for one cork (an upstream's streamed answer, a large local reply) goes out through
 * write(), chunked by uWS, and is never ended either: its last chunk is written by hand (writeLastChunk).
 * close() would cut what uWS still holds, and nothing in uWS 20.30 tells when that is sent, so such a
 * connection is closed once it has been idle for a while (CloseWhenIdle); the client, told
 * `Connection: close`, closes it first.
 */
import { CHUNK_PIECE_BYTES, fitsInCork } from '../../http/cork-budget.js';
import type { UwsBytes, UwsResponse } from '../../native/uws-types.js';

const NOT_RECORDED = 'a local reply used a response method that RecordedReply does not record';

/** What a writer did to a response: the head (status line and header lines), then the body or none. */
export class RecordedReply implements UwsResponse {
  private readonly head: UwsBytes[] = [];
  /** null: headers only (HEAD, 204, 304). */
  body: UwsBytes | null = null;
  private connectionHeader = false;

  writeStatus(status: UwsBytes): UwsResponse {
    this.head.unshift(status);
    return this;
  }

  writeHeader(key: UwsBytes, value: UwsBytes): UwsResponse {
    if (typeof key === 'string' && key === 'connection') this.connectionHeader = true;
    this.head.push('\r\n', key, ': ', value);
    return this;
  }

  end(body?: UwsBytes): UwsResponse {
    this.body = body ?? '';
    return this;
  }

  endWithoutBody(): UwsResponse {
    this.body = null;
    return this;
  }

  tryEnd(chunk: UwsBytes): [boolean, boolean] {
    this.body = chunk;
    return [true, true];
  }

  cork(cb: () => void): UwsResponse {
    cb();
    return this;
  }

  /** The head as written, with `connection: close` when the writer did not write it. */
  closingHeadBytes(): Buffer {
    return Buffer.concat(this.closingHead().map(bytesOf));
  }

  /** The whole answer, one CRLF short (writeStatus adds it), closing the connection. */
  wire(): Buffer {
    const parts = this.closingHead();
    parts.push('\r\ndate: ', new Date().toUTCString());
    const body = this.body === null ? null : bytesOf(this.body);
    if (body === null) parts.push('\r\n');
    else if (body.byteLength === 0) parts.push('\r\ncontent-length: 0\r\n');
    else parts.push(`\r\ntransfer-encoding: chunked\r\n\r\n${body.byteLength.toString(16)}\r\n`, body, '\r\n0\r\n');
    return Buffer.concat(parts.map(bytesOf));
  }

  private closingHead(): UwsBytes[] {
    const parts = [...this.head];
    if (!this.connectionHeader) parts.push('\r\nconnection: close');
    return parts;
  }

  write(): boolean {
    throw new Error(NOT_RECORDED);
  }
  close(): UwsResponse {
    throw new Error(NOT_RECORDED);
  }
  getWriteOffset(): number {
    throw new Error(NOT_RECORDED);
  }
  onWritable(): UwsResponse {
    return this;
  }
  onAborted(): UwsResponse {
    return this;
  }
  onData(): UwsResponse {
    throw new Error(NOT_RECORDED);
  }
  getRemoteAddressAsText(): ArrayBuffer {
    throw new Error(NOT_RECORDED);
  }
  getRemoteAddress(): ArrayBuffer {
    throw new Error(NOT_RECORDED);
  }
  pause(): void {}
  resume(): void {}
  upgrade(): void {
    throw new Error(NOT_RECORDED);
  }
}

function bytesOf(value: UwsBytes): Uint8Array {
  if (typeof value === 'string') return Buffer.from(value);
  return value instanceof ArrayBuffer ? new Uint8Array(value) : value;
}

/** How the connection of an answer written but not ended is closed once the answer is out: close() at once by default. */
export type CloseConnection = (res: UwsResponse) => void;

const closeNow: CloseConnection = (res) => res.close();

/** Sends `reply` on `res` and closes the connection (see the module's comment). */
export function sendClosing(res: UwsResponse, reply: RecordedReply, close: CloseConnection = closeNow): void {
  const wire = reply.wire();
  if (fitsInCork(0, wire.byteLength)) {
    res.cork(() => res.writeStatus(wire));
    closeAfterThisRead(res, close);
    return;
  }
  // Larger than a cork: the head, then the body in chunked pieces, once the read is done with.
  const head = reply.closingHeadBytes();
  const body = reply.body === null ? null : bytesOf(reply.body);
  afterThisRead(res, () => {
    const idle = new CloseWhenIdle(res);
    res.cork(() => {
      res.writeStatus(head);
      if (body !== null && body.byteLength > 0) return;
      if (body === null) endHeadByHand(res);
      else endEmptyBodyByHand(res);
    });
    if (body === null || body.byteLength === 0) return;
    let at = 0;
    const writeSome = (): boolean => {
      let ok = true;
      while (ok && at < body.byteLength) {
        const piece = body.subarray(at, Math.min(at + CHUNK_PIECE_BYTES, body.byteLength));
        at += piece.byteLength;
        res.cork(() => {
          ok = res.write(piece);
          if (at === body.byteLength) writeLastChunk(res);
        });
      }
      return ok;
    };
    if (writeSome()) return;
    res.onWritable(() => {
      idle.touch();
      // With an onWritable handler, uWS drains what it holds only when written to: an empty cork does.
      if (at === body.byteLength) res.cork(noop);
      else writeSome();
      return true;
    });
  });
}

function noop(): void {}

/**
 * Ends a head uWS will not complete (no write() or end() follows; uWS writes Date with those only):
 * Date, then the blank line, made of the last value's CRLF and the one writeHeader adds.
 */
export function endHeadByHand(res: UwsResponse): void {
  res.writeHeader('date', `${new Date().toUTCString()}\r\n`);
}

/** The same for an answer whose body is empty: `content-length: 0` after Date. */
export function endEmptyBodyByHand(res: UwsResponse): void {
  res.writeHeader('date', new Date().toUTCString());
  res.writeHeader('content-length', '0\r\n');
}

/**
 * Writes the last chunk of a body uWS is sending chunked (`write()`), without ending the response:
 * uWS 20.30 writes each chunk as CRLF, size, CRLF, data, so this ends the last data chunk, then
 * writes the last chunk and an empty trailer section. writeHeader writes `name: value` and CRLF, so
 * the ": " goes into a chunk extension's quoted value (RFC 9112 7.1.1), which recipients ignore.
 */
export function writeLastChunk(res: UwsResponse): void {
  res.writeHeader(LAST_CHUNK_NAME, LAST_CHUNK_VALUE);
}
const LAST_CHUNK_NAME = '\r\n0;end="';
const LAST_CHUNK_VALUE = '"\r\n';

/**
 * Closes a connection whose answer was written but not ended once nothing has happened on it for
 * `idleMs` (uWS's own idle timeout does not run for an unfinished answer), or `maxMs` after it began.
 * touch() on progress (onWritable, body bytes read): a slow reader still reading its answer is not cut
 * sooner than an idle one would be. closeSoon() when nothing more is awaited.
 */
export class CloseWhenIdle {
  private last = Date.now();
  private readonly until: number;
  private aborted = false;
  private closing = false;
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly res: UwsResponse,
    private readonly idleMs = IDLE_CLOSE_MS,
    maxMs = Infinity,
  ) {
    this.until = this.last + maxMs;
    res.onAborted(() => {
      this.aborted = true;
      clearTimeout(this.timer);
    });
    this.timer = setTimeout(this.check, idleMs);
    this.timer.unref();
  }

  touch(): void {
    this.last = Date.now();
  }

  /** Closes on the next turn of the event loop: not from inside a uWS handler (see afterThisRead). */
  closeSoon(): void {
    if (this.aborted || this.closing) return;
    this.closing = true;
    clearTimeout(this.timer);
    setImmediate(this.close);
  }

  private readonly check = (): void => {
    if (this.aborted || this.closing) return;
    const now = Date.now();
    if (now - this.last < this.idleMs && now < this.until) {
      this.timer.refresh();
      return;
    }
    this.closing = true;
    this.close();
  };

  private readonly close = (): void => {
    if (!this.aborted) this.res.close();
  };
}

/** As uWS's idle timeout for HTTP connections (10 s). */
export const IDLE_CLOSE_MS = 10_000;

/** Closes the connection of `res`, whose answer is written but not ended, once what it wrote is sent. */
export function closeAfterThisRead(res: UwsResponse, close: CloseConnection = closeNow): void {
  afterThisRead(res, () => close(res));
}

/**
 * Closes a connection whose client may still be sending the request body (an answer that did not wait
 * for it: 413, 401, 404, ...). close() with unread bytes in the socket makes the kernel reset the
 * connection, and a client whose TCP stack gets the reset before its application read the answer loses
 * the answer (curl: "connection reset"; nginx in front: 502, counted against the gateway). So the rest
 * of the body is read and dropped (touch() for each piece, closeSoon() at its end), and the connection
 * closed when the body has ended, when the client sent nothing for LINGER_IDLE_MS, or LINGER_MAX_MS
 * after the answer: RFC 9112 9.6's closing in stages, as nginx's lingering close (lingering_timeout
 * 5 s, lingering_time 30 s). A client that closes first (told Connection: close) ends it sooner.
 * Not res.resume(): the writer resumed a paused socket already, and in uWS 20.30 resume() on a socket
 * that is not paused stops its reading (native-notes.md).
 */
export function lingeringClose(res: UwsResponse): CloseWhenIdle {
  return new CloseWhenIdle(res, LINGER_IDLE_MS, LINGER_MAX_MS);
}

/** As nginx's lingering_timeout and lingering_time. */
export const LINGER_IDLE_MS = 5_000;
export const LINGER_MAX_MS = 30_000;

/**
 * Runs `then` after the read uWS is handling now, unless the connection closed meanwhile. Not sooner:
 * inside uWS's handler, and in the microtasks that run as it returns, uWS holds what is written in
 * its cork buffer and close() would drop it.
 */
function afterThisRead(res: UwsResponse, then: () => void): void {
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  setImmediate(() => {
    if (!aborted) then();
  });
}
