/**
 * The request head as one string, written to the socket in one call (Node's stream writes a short
 * string from a stack buffer, with no Buffer of ours in between).
 */
import { isToken } from './http-chars.js';

/** The body the request carries. */
export type RequestBody = null | Buffer | { readonly length: number };

/** Methods whose requests carry a body by definition: they get `content-length: 0` when there is none (as undici does). */
function expectsBody(method: string): boolean {
  return method === 'POST' || method === 'PUT' || method === 'PATCH';
}

/**
 * A method is a token (isToken); a target is visible ASCII (the data plane percent-encodes the rest):
 * one byte outside is searched for (callgrind: 718 against 800 instructions for ^[\x21-\x7e]+$ on a
 * 54-byte target).
 */
const NOT_TARGET = /[^\x21-\x7e]/;
/**
 * uWS 20.30 hands a client's header value with the bytes it could not decode as UTF-8 replaced by
 * U+FFFD (native-notes.md): forwarded, the value would carry other bytes than the client sent, so a
 * head holding one is refused like a split one. (One more native scan: 10-12 ns on a 330-character
 * head, against 14 for the NUL scan, node loop.)
 */
const REPLACEMENT = '\uFFFD';
/** The last method found valid: a request's method is almost always the one before it. */
let validMethod = 'GET';

/**
 * `METHOD path HTTP/1.1`, Host, the caller's end-to-end headers, the framing headers. Null when a
 * name or value holds CR, LF, NUL or U+FFFD, or the method or target is malformed: nothing a caller
 * passes can split the head. `hostLine` is ` HTTP/1.1\r\nhost: <authority>\r\n`; `bodyLength` is -2 for
 * no body, -1 for chunked, otherwise the Content-Length.
 *
 * Names and values are not scanned one by one: the names and values written are also joined into one
 * string without the line ends, and that string is searched once for each of the four (4 native scans
 * whatever the number of headers; callgrind: about 1,700 instructions fewer per request than counting
 * the head's CRs and LFs against its lines, 2 scans a line).
 */
export function serializeHead(method: string, path: string, hostLine: string, headers: readonly string[], bodyLength: number): string | null {
  if (method !== validMethod) {
    if (!isToken(method)) return null;
    validMethod = method;
  }
  if (path.length === 0 || NOT_TARGET.test(path)) return null;
  let head = method + ' ' + path + hostLine;
  let written = '';
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    const k = i >> 1;
    let line = lineStarts[k];
    if (line === undefined || name !== lineNames[k]) {
      if (isPoolOwned(name)) continue;
      line = '\r\n' + name + ': ';
      line.charCodeAt(0); // flattens it once (in place), not in every head it starts a line of
      lineNames[k] = name;
      lineStarts[k] = line;
      written += name;
    }
    const value = headers[i + 1]!;
    head = head + line + value;
    written += value;
  }
  if (bodyLength >= 0) head += '\r\ncontent-length: ' + bodyLength + '\r\n\r\n';
  else if (bodyLength === -1) head += '\r\ntransfer-encoding: chunked\r\n\r\n';
  else if (expectsBody(method)) head += '\r\ncontent-length: 0\r\n\r\n';
  else head += '\r\n\r\n';
  if (written.indexOf('\r') !== -1 || written.indexOf('\n') !== -1 || written.indexOf('\0') !== -1 || written.indexOf(REPLACEMENT) !== -1) {
    // A name cached above may be one of the refused: none is trusted any more.
    lineNames.length = 0;
    lineStarts.length = 0;
    return null;
  }
  return head;
}

/**
 * Per position in a header list, the last name written from there and its line start, "\r\n<name>: ".
 * The gateway's own headers (X-Forwarded-*, Via, traceparent) come at the same positions request after
 * request as the same strings: their line starts are made, flattened and checked once, and a name
 * found here is known to be no pool-owned header and free of what the check looks for.
 */
const lineNames: string[] = [];
const lineStarts: string[] = [];

/**
 * Headers the pool writes itself (Host, the framing) or that govern its connection (hop-by-hop):
 * a caller's copy is dropped, so it can never contradict the pool's (two Content-Lengths, or a
 * Content-Length beside chunked framing, is how requests are smuggled). Checked by length first.
 */
function isPoolOwned(name: string): boolean {
  switch (name.length) {
    case 2:
      return equalsIgnoreCase(name, 'te');
    case 4:
      return equalsIgnoreCase(name, 'host');
    case 7:
      return equalsIgnoreCase(name, 'upgrade') || equalsIgnoreCase(name, 'trailer');
    case 10:
      return equalsIgnoreCase(name, 'connection') || equalsIgnoreCase(name, 'keep-alive');
    case 14:
      return equalsIgnoreCase(name, 'content-length');
    case 16:
      return equalsIgnoreCase(name, 'proxy-connection');
    case 17:
      return equalsIgnoreCase(name, 'transfer-encoding');
    default:
      return false;
  }
}

/** `lower` is lower-case letters and '-'. */
function equalsIgnoreCase(name: string, lower: string): boolean {
  if (name === lower) return true;
  for (let i = 0; i < lower.length; i++) {
    if ((name.charCodeAt(i) | 0x20) !== lower.charCodeAt(i)) return false;
  }
  return true;
}
