/**
 * Which peers may speak for a client (`trustedProxies`, docs/reference/accept.md#trusted-proxies), and the one function that decides
 * a request's client address: the access log, metrics and rate limits all use it.
 */
import { formatIp, inRange, parseIp, parseRange, type IpRange } from './ip-ranges.js';

export class TrustedProxies {
  private readonly ranges: readonly IpRange[];
  /** Consecutive requests mostly come from the same peer: its answer is kept. */
  private lastAddress = '';
  private lastTrusted = false;

  /** `entries` were checked by the config loader (see rangeProblem). */
  constructor(entries: readonly string[]) {
    const ranges: IpRange[] = [];
    for (const entry of entries) {
      const range = parseRange(entry);
      if (typeof range === 'string') throw new RangeError(`trustedProxies: ${range}`);
      ranges.push(range);
    }
    this.ranges = ranges;
  }

  /** No proxy is trusted: every peer is the client. */
  get none(): boolean {
    return this.ranges.length === 0;
  }

  /** Whether `peer` (a connection's address) is a trusted proxy; the last answer is kept. */
  isTrusted(peer: string): boolean {
    if (this.ranges.length === 0) return false;
    if (peer === this.lastAddress) return this.lastTrusted;
    const trusted = this.matches(peer);
    this.lastAddress = peer;
    this.lastTrusted = trusted;
    return trusted;
  }

  private matches(address: string): boolean {
    const ip = parseIp(address);
    if (ip === null) return false;
    for (const range of this.ranges) if (inRange(ip, range)) return true;
    return false;
  }

  /**
   * The client's address. From an untrusted peer: the peer. From a trusted one: the rightmost
   * X-Forwarded-For hop that is not a trusted proxy (like nginx's real_ip_recursive). A hop that is not
   * an address stops the walk: the client is then the nearest hop to its right (a trusted proxy saw it).
   * When every hop is trusted, the leftmost.
   */
  clientAddress(peer: string, forwardedFor: string | undefined): string {
    if (forwardedFor === undefined || !this.isTrusted(peer)) return peer;
    let client = peer;
    let end = forwardedFor.length;
    while (end > 0) {
      const start = forwardedFor.lastIndexOf(',', end - 1) + 1;
      const hop = hopAddress(forwardedFor.slice(start, end).trim());
      end = start - 1;
      if (hop === null) break;
      client = hop;
      if (!this.matches(hop)) break;
    }
    return client;
  }
}

/** Why a `trustedProxies` entry is not usable, or null when it is. */
export function rangeProblem(entry: string): string | null {
  const range = parseRange(entry);
  return typeof range === 'string' ? range : null;
}

/**
 * An X-Forwarded-For hop as an address: "1.2.3.4", "1.2.3.4:5678", "2001:db8::1", "[2001:db8::1]:443",
 * written one way (formatIp: `::ffff:1.2.3.4` is `1.2.3.4`, `2001:DB8:0::1` is `2001:db8::1`).
 */
function hopAddress(hop: string): string | null {
  const direct = parseIp(hop);
  if (direct !== null) return formatIp(direct);
  if (hop.charCodeAt(0) === 0x5b) {
    const close = hop.indexOf(']');
    const inner = close === -1 ? null : parseIp(hop.slice(1, close));
    return inner === null ? null : formatIp(inner);
  }
  const colon = hop.indexOf(':');
  if (colon !== -1 && hop.indexOf(':', colon + 1) === -1) {
    const host = parseIp(hop.slice(0, colon));
    return host === null ? null : formatIp(host);
  }
  return null;
}
