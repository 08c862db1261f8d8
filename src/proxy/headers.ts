/**
 * Header rules of the proxy (contract 7): which upstream response headers reach the client.
 */

/** What to do with one upstream response header. */
export const enum ResponseHeader {
  Pass,
  /** Hop-by-hop, or framing/Date that uWS writes itself. */
  Drop,
  ContentLength,
  Connection,
  Via,
}

/** Lower-case ASCII `name` equals `buf` case-insensitively. */
function equalsLower(buf: Buffer, name: string): boolean {
  if (buf.length !== name.length) return false;
  for (let i = 0; i < name.length; i++) {
    if ((buf[i] | 0x20) !== name.charCodeAt(i)) return false;
  }
  return true;
}

/**
 * Classifies a raw header name from undici. `| 0x20` lower-cases letters and leaves '-' (0x2d) alone,
 * which is all the names compared here contain.
 */
export function classifyResponseHeader(name: Buffer): ResponseHeader {
  switch (name.length) {
    case 2:
      return equalsLower(name, 'te') ? ResponseHeader.Drop : ResponseHeader.Pass;
    case 3:
      return equalsLower(name, 'via') ? ResponseHeader.Via : ResponseHeader.Pass;
    case 4:
      // uWS always writes its own Date (nginx drops the upstream's too).
      return equalsLower(name, 'date') ? ResponseHeader.Drop : ResponseHeader.Pass;
    case 7:
      return equalsLower(name, 'trailer') || equalsLower(name, 'upgrade') ? ResponseHeader.Drop : ResponseHeader.Pass;
    case 10:
      if (equalsLower(name, 'connection')) return ResponseHeader.Connection;
      return equalsLower(name, 'keep-alive') ? ResponseHeader.Drop : ResponseHeader.Pass;
    case 14:
      return equalsLower(name, 'content-length') ? ResponseHeader.ContentLength : ResponseHeader.Pass;
    case 17:
      return equalsLower(name, 'transfer-encoding') ? ResponseHeader.Drop : proxyPrefixed(name);
    default:
      return proxyPrefixed(name);
  }
}

/** Proxy-* (Proxy-Connection, Proxy-Authenticate, ...), compared in place: no subarray per header. */
function proxyPrefixed(name: Buffer): ResponseHeader {
  if (name.length <= 6) return ResponseHeader.Pass;
  for (let i = 0; i < 6; i++) {
    if ((name[i] | 0x20) !== PROXY_PREFIX.charCodeAt(i)) return ResponseHeader.Pass;
  }
  return ResponseHeader.Drop;
}
const PROXY_PREFIX = 'proxy-';

/** A Connection value of just "keep-alive" or "close" (any case), which names no other header. */
export function isPlainConnectionValue(value: Buffer): boolean {
  return equalsLower(value, 'keep-alive') || equalsLower(value, 'close');
}

/** Digits only (a Content-Length value); -1 otherwise. */
export function parseDigits(value: Buffer): number {
  if (value.length === 0 || value.length > 15) return -1;
  let n = 0;
  for (let i = 0; i < value.length; i++) {
    const digit = value[i] - 0x30;
    if (digit < 0 || digit > 9) return -1;
    n = n * 10 + digit;
  }
  return n;
}

/** Header names an upstream's Connection header lists beyond close/keep-alive (lower case), or null. */
export function connectionNamedHeaders(value: string): string[] | null {
  let named: string[] | null = null;
  for (const token of value.split(',')) {
    const name = token.trim().toLowerCase();
    if (name === '' || name === 'close' || name === 'keep-alive') continue;
    (named ??= []).push(name);
  }
  return named;
}
