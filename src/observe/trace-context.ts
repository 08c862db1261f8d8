/**
 * W3C Trace Context level 1 (https://www.w3.org/TR/trace-context/): reading and writing `traceparent`
 * and carrying `tracestate`. The gateway continues a valid incoming trace (same trace id, its own span
 * as the parent of the upstream call) and starts one when there is none or it is invalid.
 */

/** What a valid traceparent carries. */
export interface TraceParent {
  /** 32 lower-case hex characters, not all zero. */
  traceId: string;
  /** The caller's span: 16 lower-case hex characters, not all zero. */
  parentId: string;
  /** trace-flags; bit 0 is "sampled". */
  flags: number;
}

export const SAMPLED = 0x01;
/** version "00": 2 + 1 + 32 + 1 + 16 + 1 + 2. */
const V00_LENGTH = 55;
const ZERO_TRACE_ID = '00000000000000000000000000000000';
const ZERO_SPAN_ID = '0000000000000000';

function isLowerHex(text: string, start: number, end: number): boolean {
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return false;
  }
  return true;
}

/**
 * A traceparent header value, or null when it is invalid: not lower-case hex, version "ff", an
 * all-zero trace or parent id, wrong dashes, or a version 00 value of any length but 55. A later
 * version is read by its first 55 characters, which must be followed by nothing or a "-" (the spec's
 * forward compatibility rule).
 */
export function parseTraceparent(value: string): TraceParent | null {
  const length = value.length;
  if (length < V00_LENGTH) return null;
  if (!isLowerHex(value, 0, 2)) return null;
  const version = value.slice(0, 2);
  if (version === 'ff') return null;
  if (version === '00' ? length !== V00_LENGTH : length > V00_LENGTH && value.charCodeAt(V00_LENGTH) !== 0x2d) return null;
  if (value.charCodeAt(2) !== 0x2d || value.charCodeAt(35) !== 0x2d || value.charCodeAt(52) !== 0x2d) return null;
  if (!isLowerHex(value, 3, 35) || !isLowerHex(value, 36, 52) || !isLowerHex(value, 53, 55)) return null;
  const traceId = value.slice(3, 35);
  const parentId = value.slice(36, 52);
  if (traceId === ZERO_TRACE_ID || parentId === ZERO_SPAN_ID) return null;
  return { traceId, parentId, flags: parseInt(value.slice(53, 55), 16) };
}

/**
 * A version 00 traceparent. Only the sampled flag is defined in level 1; the other bits are written as
 * zero, as the spec asks of a vendor that does not know them.
 */
export function formatTraceparent(traceId: string, spanId: string, sampled: boolean): string {
  return sampled ? `00-${traceId}-${spanId}-01` : `00-${traceId}-${spanId}-00`;
}

/** Longest tracestate passed on; the spec asks vendors to propagate at least 512 characters. */
export const MAX_TRACESTATE = 8192;
/** Most list members a tracestate may hold; empty members are not counted. */
const MAX_MEMBERS = 32;

/** a-z, 0-9, "_", "-", "*", "/": every character of a key but its first, "@" aside. */
function isKeyChar(c: number): boolean {
  return (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x5f || c === 0x2d || c === 0x2a || c === 0x2f;
}

/**
 * A level 1 key: a simple key (a-z first, 1-256 characters) or tenant@system, the tenant 1-241
 * characters beginning with a-z or 0-9, the system 1-14 beginning with a-z.
 */
function isKey(text: string, start: number, end: number): boolean {
  if (start >= end) return false;
  const at = text.indexOf('@', start);
  if (at === -1 || at >= end) {
    const first = text.charCodeAt(start);
    if (end - start > 256 || first < 0x61 || first > 0x7a) return false;
    for (let i = start + 1; i < end; i++) if (!isKeyChar(text.charCodeAt(i))) return false;
    return true;
  }
  if (at - start > 241 || end - at - 1 > 14 || at + 1 >= end) return false;
  const first = text.charCodeAt(start);
  const systemFirst = text.charCodeAt(at + 1);
  if (!((first >= 0x61 && first <= 0x7a) || (first >= 0x30 && first <= 0x39)) || systemFirst < 0x61 || systemFirst > 0x7a) return false;
  for (let i = start + 1; i < at; i++) if (!isKeyChar(text.charCodeAt(i))) return false;
  for (let i = at + 2; i < end; i++) if (!isKeyChar(text.charCodeAt(i))) return false;
  return true;
}

/**
 * The tracestate to pass on with a valid traceparent, unchanged (the gateway adds no entry of its
 * own), or null to drop it whole: longer than MAX_TRACESTATE, no list member, or not a valid level 1
 * list (a malformed key or value, more than 32 members, a key twice). Whitespace around members and
 * empty members are allowed, as the spec asks when several headers are joined.
 */
export function passTracestate(value: string | undefined): string | null {
  if (value === undefined || value.length === 0 || value.length > MAX_TRACESTATE) return null;
  const length = value.length;
  let keys: string[] | null = null;
  for (let start = 0; start <= length; ) {
    let end = value.indexOf(',', start);
    if (end === -1) end = length;
    const next = end + 1;
    // Spaces and tabs around a member are not part of it (a value's trailing spaces among them).
    while (start < end && isOws(value.charCodeAt(start))) start++;
    while (end > start && isOws(value.charCodeAt(end - 1))) end--;
    if (start < end) {
      const eq = value.indexOf('=', start);
      if (eq === -1 || eq >= end || !isKey(value, start, eq) || end - eq - 1 > 256) return null;
      for (let i = eq + 1; i < end; i++) {
        const c = value.charCodeAt(i);
        if (c < 0x20 || c > 0x7e || c === 0x3d) return null;
      }
      if (eq + 1 === end) return null;
      const key = value.slice(start, eq);
      if (keys === null) keys = [key];
      else if (keys.length === MAX_MEMBERS || keys.includes(key)) return null;
      else keys.push(key);
    }
    start = next;
  }
  return keys === null ? null : value;
}

function isOws(c: number): boolean {
  return c === 0x20 || c === 0x09;
}
