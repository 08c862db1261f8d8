/**
 * How much one res.cork() may carry without risking the bytes after it.
 *
 * uWS collects corked writes in a 16 KiB per-loop buffer. A write that does not fit first flushes the
 * buffer and then writes itself; in uWS 20.30 (the trufflesuite build) a flush the socket takes only
 * in part returns early and the write that did not fit is dropped without a word (AsyncSocket::uncork
 * returns on `failed` instead of on `failed && optionally`; fixed in later uWS). A chunked body then
 * carries a chunk size without its data, and a sized one stops short of its Content-Length. It takes a
 * socket whose kernel buffer is exactly full while uWS's own backpressure buffer is empty: rare, but a
 * 1 GiB chunked download hit it (test/lifecycle/data-plane-streaming.test.ts).
 *
 * The rule for every build: the bytes written in one cork by calls that must not fail (writeStatus,
 * writeHeader, write, end) stay within CORK_BUFFER_BYTES. tryEnd's body is an optional write (what
 * the socket does not take is reported back), so it is safe at any size. An upstream head too large
 * to share a cork with what follows it goes out first, in corks of its own cut at line ends
 * (UwsClient.spillHead in src/lifecycle/uws/uws-client.ts). Left: a single header line longer than the buffer,
 * which only a maxResponseHeaderBytes raised past 16 KiB admits; native-notes.md says so.
 */
import type { UwsBytes, UwsResponse } from '../native/uws-types.js';

/** uWS's LoopData::CORK_BUFFER_SIZE. */
export const CORK_BUFFER_BYTES = 16 * 1024;

/**
 * What uWS adds around ours in one answer: status line, Date, its own header, Content-Length and the
 * blank line, chunk framing.
 */
export const CORK_SLACK_BYTES = 256;

/** Body bytes one chunked write may carry in a cork of its own. */
export const CHUNK_PIECE_BYTES = CORK_BUFFER_BYTES - CORK_SLACK_BYTES;

/** Bytes writeHeader puts in the cork for one header (name, ": ", value, CRLF). */
export function headerBytes(name: UwsBytes, value: UwsBytes): number {
  return byteLengthUpperBound(name) + byteLengthUpperBound(value) + 4;
}

/** Writes flat [name, value, ...] headers; returns the bytes they put in the cork (headerBytes of each). */
export function writeHeaders(res: UwsResponse, headers: readonly string[]): number {
  let bytes = 0;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    const value = headers[i + 1]!;
    res.writeHeader(name, value);
    bytes += headerBytes(name, value);
  }
  return bytes;
}

/**
 * `text` followed by flat [name, value, ...] headers as header lines ("\r\nname: value" each): what
 * writeHeader would write for each, without the line end after the last one. Given to writeStatus
 * after the status line, one native call and one string conversion carry a whole head (see
 * writeHeadBlock in src/lifecycle/uws/uws-client.ts) instead of a call and two conversions per header.
 * Safe for what the gateway writes: names are tokens and values free of CR, LF and NUL (the upstream
 * client admits no other; the gateway's own are constants or built from checked parts).
 */
export function appendHeaderLines(text: string, headers: readonly string[]): string {
  for (let i = 0; i < headers.length; i += 2) text += '\r\n' + headers[i]! + ': ' + headers[i + 1]!;
  return text;
}

/** At most this many bytes: exact for bytes, three per UTF-16 unit for a string (no encoding pass). */
export function byteLengthUpperBound(value: UwsBytes): number {
  return typeof value === 'string' ? value.length * 3 : value.byteLength;
}

/** A head of `head` bytes and a body of `body` bytes fit in one cork. */
export function fitsInCork(head: number, body: number): boolean {
  return head + body + CORK_SLACK_BYTES <= CORK_BUFFER_BYTES;
}

/**
 * Ends a response whose status and headers (`headBytes` of them) are written, with a whole body. A
 * body that fits goes out by end(); a larger one by tryEnd and, for what the socket does not take now,
 * onWritable. The caller has finished with the response (it may not need onAborted or onWritable
 * again): both handlers are replaced when the body has to wait.
 */
export function endWithBody(res: UwsResponse, body: string | Uint8Array, closeConnection: boolean, headBytes: number): void {
  if (fitsInCork(headBytes, byteLengthUpperBound(body))) {
    res.end(body, closeConnection);
    return;
  }
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  if (fitsInCork(headBytes, bytes.byteLength)) {
    res.end(bytes, closeConnection);
    return;
  }
  // tryEnd cannot close the connection after the body; the client is asked to.
  if (closeConnection) res.writeHeader('connection', 'close');
  const total = bytes.byteLength;
  const [, done] = res.tryEnd(bytes, total);
  if (done) return;
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  res.onWritable((offset) => {
    if (aborted) return true;
    const [ok] = res.tryEnd(bytes.subarray(offset), total);
    return ok;
  });
}
