import { isIP } from 'node:net';
import { isHostName } from '../edge/host-value.js';
import { shown } from './config-problem.js';

/** A name whose last label is all digits ("80", "256.1.1.1") is a mistyped address, not a name. */
const NUMERIC_LAST_LABEL = /(?:^|\.)[0-9]+\.?$/;

/**
 * Why `host` cannot be listened on, by its form alone, or null: an IPv4 or IPv6 address, or a host name
 * (resolved when the gateway starts, where a name that does not resolve is refused).
 */
export function listenHostProblem(host: string): string | null {
  if (isIP(host) !== 0) return null;
  if (host.startsWith('[') && host.endsWith(']') && isIP(host.slice(1, -1)) === 6) {
    return `${shown(host)}: write an IPv6 address without brackets ("${host.slice(1, -1)}")`;
  }
  if (isHostName(host) && !NUMERIC_LAST_LABEL.test(host)) return null;
  return `${shown(host)} is neither an IP address nor a host name (e.g. "0.0.0.0", "::", "127.0.0.1" or "localhost")`;
}
