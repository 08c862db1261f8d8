/**
 * The request head as one string, written to the socket in one call (Node's stream writes a short
 * string from a stack buffer, with no Buffer of ours in between).
 */

/** The body the request carries. */
export type RequestBody = null | Buffer | { readonly length: number };

/** Methods whose requests carry a body by definition: they get `content-length: 0` when there is none (as undici does). */
function expectsBody(method: string): boolean {
  return method === 'POST' || method === 'PUT' || method === 'PATCH';
}

/** CR, LF or NUL: would end a header line early, so a value with one cannot be written. */
const LINE_BREAKER = /[\r\n\0]/;
/** A method is a token; a target is visible ASCII (the data plane percent-encodes the rest). */
const METHOD = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const TARGET = /^[\x21-\x7e]+$/;

/**
 * `METHOD path HTTP/1.1`, Host, the caller's end-to-end headers, the framing headers. Null when a
 * name or value holds CR, LF or NUL, or the method or target is malformed: nothing a caller passes
 * can split the head. `hostLine` is ` HTTP/1.1\r\nhost: <authority>\r\n`; `bodyLength` is -2 for
 * no body, -1 for chunked, otherwise the Content-Length.
 */
export function serializeHead(method: string, path: string, hostLine: string, headers: readonly string[], bodyLength: number): string | null {
  if (!METHOD.test(method) || !TARGET.test(path)) return null;
  let head = method + ' ' + path + hostLine;
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i];
    const value = headers[i + 1];
    if (LINE_BREAKER.test(value) || LINE_BREAKER.test(name)) return null;
    if (isPoolOwned(name)) continue;
    head += name + ': ' + value + '\r\n';
  }
  if (bodyLength >= 0) head += 'content-length: ' + bodyLength + '\r\n\r\n';
  else if (bodyLength === -1) head += 'transfer-encoding: chunked\r\n\r\n';
  else if (expectsBody(method)) head += 'content-length: 0\r\n\r\n';
  else head += '\r\n';
  return head;
}

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
