/**
 * Checks a host given where a Host header's value is expected (`/spec?host=`): a DNS name or IPv4
 * address, or an IPv6 address in brackets, each with an optional `:port`; a trailing dot is allowed.
 * A value refused here is one no virtual host serves: routing's wildcards stand for DNS labels only
 * (isDnsName, ./server-names.ts), and an exact name is one.
 */
import { isIPv6 } from 'node:net';
import { isValidHost } from '../http/host-header.js';

/** RFC 1035's limit on a name's text form, trailing dot aside. */
export const MAX_HOST_NAME_LENGTH = 253;

/** The characters of a label; "-" is not first or last. */
const LABEL_CHARS = new Uint8Array(128);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_') LABEL_CHARS[c.charCodeAt(0)] = 1;
const MAX_LABEL_LENGTH = 63;

/** Why `value` is not a host, or null when it is one. */
export function hostValueProblem(value: string): string | null {
  if (value === '') return 'host is empty';
  let name = value;
  let port: string | null = null;
  if (value.startsWith('[')) {
    const close = value.indexOf(']');
    // isIPv6 takes a zone (`fe80::1%eth0`), which a Host cannot carry (RFC 3986 3.2.2; the accept phase refuses it).
    if (close === -1 || !isIPv6(value.slice(1, close)) || !isValidHost(value.slice(0, close + 1))) return 'host is not a valid IPv6 address in brackets';
    const rest = value.slice(close + 1);
    if (rest !== '' && !rest.startsWith(':')) return 'host has text after its IPv6 address';
    return rest === '' ? null : portProblem(rest.slice(1));
  }
  const colon = value.indexOf(':');
  if (colon !== -1) {
    name = value.slice(0, colon);
    port = value.slice(colon + 1);
  }
  if ((name.endsWith('.') ? name.length - 1 : name.length) > MAX_HOST_NAME_LENGTH) return `host name is longer than ${MAX_HOST_NAME_LENGTH} characters`;
  if (!isHostName(name)) return 'host is not a host name (labels of letters, digits, "-" and "_", 63 characters at most each)';
  return port === null ? null : portProblem(port);
}

/**
 * A DNS name as getaddrinfo takes one: dot-separated labels of letters, digits, "-" (not first or last)
 * and "_" (Docker service names have them), at most 63 characters each and MAX_HOST_NAME_LENGTH in all,
 * an optional final dot.
 */
export function isHostName(value: string): boolean {
  return isDnsName(value.endsWith('.') ? value.slice(0, -1) : value);
}

/** isHostName without the final dot. A loop over the characters: routing asks it of Hosts. */
export function isDnsName(name: string): boolean {
  const end = name.length;
  if (end === 0 || end > MAX_HOST_NAME_LENGTH) return false;
  let start = 0;
  for (let at = 0; at <= end; at++) {
    const c = at === end ? 0x2e : name.charCodeAt(at);
    if (c === 0x2e) {
      if (at === start || at - start > MAX_LABEL_LENGTH || name.charCodeAt(start) === 0x2d || name.charCodeAt(at - 1) === 0x2d) return false;
      start = at + 1;
    } else if (c > 0x7f || LABEL_CHARS[c] === 0) {
      return false;
    }
  }
  return true;
}

/** A Host header's port is any run of digits (RFC 3986 3.2.3); matching does not look at it. */
function portProblem(port: string): string | null {
  return /^[0-9]*$/.test(port) ? null : 'host has a port that is not a number';
}
