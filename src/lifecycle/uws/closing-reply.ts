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
 * chunked. An answer too large for one cork (close() would cut what the socket has not taken) is
 * written as before, with end(body, true), once the read is done with.
 */
import { endWithBody, fitsInCork } from '../../http/cork-budget.js';
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

  /** The head as written, without its end. */
  headBytes(): Buffer {
    return Buffer.concat(this.head.map(bytesOf));
  }

  /** The whole answer, one CRLF short (writeStatus adds it), closing the connection. */
  wire(): Buffer {
    const parts = [...this.head];
    if (!this.connectionHeader) parts.push('\r\nconnection: close');
    parts.push('\r\ndate: ', new Date().toUTCString());
    const body = this.body === null ? null : bytesOf(this.body);
    if (body === null) parts.push('\r\n');
    else if (body.byteLength === 0) parts.push('\r\ncontent-length: 0\r\n');
    else parts.push(`\r\ntransfer-encoding: chunked\r\n\r\n${body.byteLength.toString(16)}\r\n`, body, '\r\n0\r\n');
    return Buffer.concat(parts.map(bytesOf));
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

/** Sends `reply` on `res` and closes the connection (see the module's comment). */
export function sendClosing(res: UwsResponse, reply: RecordedReply): void {
  const wire = reply.wire();
  if (fitsInCork(0, wire.byteLength)) {
    res.cork(() => res.writeStatus(wire));
    closeAfterThisRead(res);
    return;
  }
  const head = reply.headBytes();
  const body = reply.body === null ? null : bytesOf(reply.body);
  afterThisRead(res, () => {
    res.cork(() => {
      res.writeStatus(head);
      if (body === null) res.endWithoutBody();
      else endWithBody(res, body, true, head.byteLength + 2);
    });
  });
}

/** Closes the connection of `res`, whose answer is written but not ended, once what it wrote is sent. */
export function closeAfterThisRead(res: UwsResponse): void {
  afterThisRead(res, () => res.close());
}

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
