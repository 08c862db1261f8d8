/**
 * Errors the gateway itself answers with: RFC 9457 `application/problem+json` bodies carrying
 * type, title, status and detail. Never a stack trace: `detail` is always a sentence we wrote.
 */
import type { UwsResponse } from '../native/uws-types.js';
import { appendHeaderLines, byteLengthUpperBound, endWithBody, writeHeaders } from './cork-budget.js';
import type { HeadBlock } from './head-block.js';
import { reasonPhrase, statusLine } from './status-line.js';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';
const PROBLEM_HEADERS = `\r\ncontent-type: ${PROBLEM_CONTENT_TYPE}\r\ncache-control: no-store`;

export interface ProblemOptions {
  /** `Allow` header (405). */
  allow?: string;
  /** `Via` header value. */
  via?: string;
  /** Headers and Content-Length only (the request was HEAD). */
  headersOnly?: boolean;
  /** Close the connection after the response (the request's framing cannot be trusted, or its body was not read). */
  closeConnection?: boolean;
  /** More headers, flat [name, value, ...] (a middleware's WWW-Authenticate, Retry-After, RateLimit...). */
  headers?: readonly string[] | null;
}

/** With type about:blank the title is the status's reason phrase (RFC 9457 4.2.1). */
export function problemTitle(status: number): string {
  return reasonPhrase(status) ?? 'Error';
}

export function problemBody(status: number, detail: string): string {
  return JSON.stringify({ type: 'about:blank', title: problemTitle(status), status, detail });
}

/**
 * Writes and ends a problem response. Call it where uWS is corked (inside the request handler or
 * res.cork). Returns the body length (the bytes sent after the head).
 */
export function writeProblem(res: UwsResponse, status: number, detail: string, options?: ProblemOptions): number {
  const body = problemBody(status, detail);
  // One writeStatus for the status line and every header (appendHeaderLines).
  let head = statusLine(status) + PROBLEM_HEADERS;
  if (options?.allow) head += '\r\nallow: ' + options.allow;
  if (options?.via) head += '\r\nvia: ' + options.via;
  const headers = options?.headers;
  if (headers) head = appendHeaderLines(head, headers);
  res.writeStatus(head);
  if (options?.headersOnly) {
    res.writeHeader('content-length', String(Buffer.byteLength(body)));
    // uWS only closes for end(body, true); a HEAD answer asks the client to close instead.
    if (options.closeConnection) res.writeHeader('connection', 'close');
    // Never pass arguments: in uWS 20.30 endWithoutBody(n) leaves the response open and
    // endWithoutBody(undefined) writes a garbage Content-Length (native-notes.md).
    res.endWithoutBody();
    return 0;
  }
  res.end(body, options?.closeConnection === true);
  return Buffer.byteLength(body);
}

export interface ContentOptions {
  via: string;
  headersOnly: boolean;
  closeConnection: boolean;
  /** More headers after the answer's own, flat (a middleware's response headers). */
  headers?: readonly string[] | null;
  /**
   * The answer's own header values are an upstream's bytes, one character per byte (read as latin1):
   * written back as those bytes, not encoded as UTF-8.
   */
  latin1?: boolean;
  /** Where the answer's head (status line, `headers`, Via) is kept encoded: given when it is written many times as it is. */
  block?: HeadBlock;
}

/**
 * Writes and ends an answer with content of the gateway's own (a cached response): its status and
 * headers, Via, the extra headers, and the body (only its length for HEAD). Corked, like writeProblem.
 * Returns the body bytes sent.
 */
export function writeContent(res: UwsResponse, status: number, headers: readonly string[], body: Uint8Array, options: ContentOptions): number {
  let headBytes: number;
  const block = options.block;
  if (block !== undefined) {
    headBytes = writeHeadBlock(res, block, status, headers, options);
  } else if (options.latin1 === true) {
    const head = appendHeaderLines(statusLine(status), headers) + '\r\nvia: ' + options.via;
    res.writeStatus(Buffer.from(head, 'latin1'));
    headBytes = head.length + 2 + (options.headers ? writeHeaders(res, options.headers) : 0);
  } else {
    // One writeStatus for the status line and every header (appendHeaderLines): a cached answer has 5-10.
    let head = appendHeaderLines(statusLine(status), headers) + '\r\nvia: ' + options.via;
    if (options.headers) head = appendHeaderLines(head, options.headers);
    res.writeStatus(head);
    headBytes = byteLengthUpperBound(head) + 2;
  }
  if (status === 304 || status === 204) {
    // No content and no Content-Length: a 304 (a cache's answer to a conditional request) has none, and a
    // 204 must not carry one (RFC 9110 8.6), which uWS would write for an empty body.
    if (options.closeConnection) res.writeHeader('connection', 'close');
    res.endWithoutBody();
    return 0;
  }
  if (options.headersOnly) {
    res.writeHeader('content-length', String(body.byteLength));
    if (options.closeConnection) res.writeHeader('connection', 'close');
    res.endWithoutBody();
    return 0;
  }
  endWithBody(res, body, options.closeConnection, headBytes);
  return body.byteLength;
}

/**
 * The head of writeContent's string path, the same bytes: `block` (made now if it is new or of another
 * Via) as the status, then the extra headers one writeHeader each ("name: value" lines after it, as
 * appended to the text). Spares the text's concatenation and its conversion by uWS per write
 * (callgrind: about 4,000 fewer instructions per cache hit). Returns the same cork estimate.
 */
function writeHeadBlock(res: UwsResponse, block: HeadBlock, status: number, headers: readonly string[], options: ContentOptions): number {
  if (block.via !== options.via) {
    const text = appendHeaderLines(statusLine(status), headers) + '\r\nvia: ' + options.via;
    block.bytes = Buffer.from(text, 'utf8');
    block.length = text.length;
    block.via = options.via;
  }
  res.writeStatus(block.bytes);
  let length = block.length;
  const extra = options.headers;
  if (extra) {
    for (let i = 0; i < extra.length; i += 2) {
      const name = extra[i]!;
      const value = extra[i + 1]!;
      res.writeHeader(nameBytes(name), value);
      length += 4 + name.length + value.length;
    }
  }
  return length * 3 + 2;
}

/** Header names of the gateway's own headers (a few constants: X-Request-Id, a middleware's), encoded once. */
const NAMES = new Map<string, Buffer>();
const MAX_NAMES = 64;

/** `name` as the UTF-8 bytes uWS would make of it, kept for the next answer (callgrind: about 800 instructions a header). */
function nameBytes(name: string): Buffer | string {
  const bytes = NAMES.get(name);
  if (bytes !== undefined) return bytes;
  if (NAMES.size >= MAX_NAMES) return name;
  const made = Buffer.from(name, 'utf8');
  NAMES.set(name, made);
  return made;
}
