/**
 * Checks a host given where a Host header's value is expected (`/spec?host=`): a DNS name or IPv4
 * address, or an IPv6 address in brackets, each with an optional `:port`; a trailing dot is allowed.
 */
import { isIPv6 } from 'node:net';

/** RFC 1035's limit on a name's text form, trailing dot aside. */
export const MAX_HOST_NAME_LENGTH = 253;

const LABEL = /^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/;

/** Why `value` is not a host, or null when it is one. */
export function hostValueProblem(value: string): string | null {
  if (value === '') return 'host is empty';
  let name = value;
  let port: string | null = null;
  if (value.startsWith('[')) {
    const close = value.indexOf(']');
    if (close === -1 || !isIPv6(value.slice(1, close))) return 'host is not a valid IPv6 address in brackets';
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
  const name = value.endsWith('.') ? value.slice(0, -1) : value;
  return name !== '' && name.length <= MAX_HOST_NAME_LENGTH && name.split('.').every((label) => LABEL.test(label));
}

function portProblem(port: string): string | null {
  return /^[0-9]{1,5}$/.test(port) && Number(port) <= 65535 ? null : 'host has a port that is not a number from 0 to 65535';
}
