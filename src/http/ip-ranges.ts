/**
 * IPv4/IPv6 addresses and CIDR ranges, for `trustedProxies`.
 *
 * node:net's BlockList does this job but costs ~3.4 µs per check() on this machine (it builds a
 * SocketAddress per call); the data plane checks the peer of every request, so this is a plain parser
 * into integers and a masked compare. IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are matched as IPv4.
 */

/** An address as 8 16-bit words for IPv6, or one 32-bit number for IPv4 (words null). */
export interface ParsedIp {
  readonly v4: number;
  readonly v6: Uint16Array | null;
}

export interface IpRange {
  readonly base: ParsedIp;
  /** Leading bits that must match. */
  readonly prefix: number;
}

/** Parses an IPv4 or IPv6 address (no brackets, no zone, no port); null when it is not one. */
export function parseIp(text: string): ParsedIp | null {
  if (text.indexOf(':') === -1) {
    const v4 = parseV4(text);
    return v4 < 0 ? null : { v4, v6: null };
  }
  const words = parseV6(text);
  if (words === null) return null;
  // ::ffff:a.b.c.d is the IPv4 address a.b.c.d.
  if (words[0] === 0 && words[1] === 0 && words[2] === 0 && words[3] === 0 && words[4] === 0 && words[5] === 0xffff) {
    return { v4: ((words[6]! << 16) | words[7]!) >>> 0, v6: null };
  }
  return { v4: 0, v6: words };
}

/** "10.0.0.0/8", "2001:db8::/32" or a single address; a reason string when it is neither. */
export function parseRange(text: string): IpRange | string {
  const slash = text.indexOf('/');
  const addressText = slash === -1 ? text : text.slice(0, slash);
  const base = parseIp(addressText);
  if (base === null) return `"${addressText}" is not an IPv4 or IPv6 address`;
  const mapped = base.v6 === null && addressText.indexOf(':') !== -1;
  const width = base.v6 === null ? 32 : 128;
  if (slash === -1) return { base, prefix: width };
  const prefixText = text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefixText)) return `"${prefixText}" is not a prefix length`;
  let prefix = Number(prefixText);
  // ::ffff:10.0.0.0/104 covers 10.0.0.0/8.
  if (mapped) {
    if (prefix < 96) return `a prefix shorter than /96 on an IPv4-mapped address (${text}) would cover IPv6 addresses; write the IPv4 range`;
    prefix -= 96;
  }
  if (prefix > width) return `/${prefixText} is longer than ${mapped ? 128 : width} bits`;
  return { base, prefix };
}

/**
 * An address written one way (RFC 5952 for IPv6: lower case, no leading zeros, the longest run of two
 * or more zero words as "::", the first of equal runs; an IPv4-mapped address as IPv4), so that one
 * client written several ways (`::FFFF:5.5.5.5`, `0:0:0:0:0:ffff:505:505`) is one rate-limit key and
 * one access-log client.
 */
export function formatIp(ip: ParsedIp): string {
  const words = ip.v6;
  if (words === null) return `${ip.v4 >>> 24}.${(ip.v4 >>> 16) & 0xff}.${(ip.v4 >>> 8) & 0xff}.${ip.v4 & 0xff}`;
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let end = i;
    while (end < 8 && words[end] === 0) end++;
    if (end - i > bestLength) {
      bestStart = i;
      bestLength = end - i;
    }
    i = end;
  }
  const hex = (from: number, to: number): string => Array.from(words.subarray(from, to), (word) => word.toString(16)).join(':');
  if (bestStart === -1) return hex(0, 8);
  return `${hex(0, bestStart)}::${hex(bestStart + bestLength, 8)}`;
}

export function inRange(ip: ParsedIp, range: IpRange): boolean {
  const base = range.base;
  if ((ip.v6 === null) !== (base.v6 === null)) return false;
  if (ip.v6 === null) {
    if (range.prefix === 0) return true;
    const mask = range.prefix === 32 ? 0xffffffff : ~(0xffffffff >>> range.prefix) >>> 0;
    return ((ip.v4 & mask) >>> 0) === ((base.v4 & mask) >>> 0);
  }
  let bits = range.prefix;
  for (let i = 0; i < 8 && bits > 0; i++, bits -= 16) {
    const mask = bits >= 16 ? 0xffff : (0xffff << (16 - bits)) & 0xffff;
    if ((ip.v6[i]! & mask) !== (base.v6![i]! & mask)) return false;
  }
  return true;
}

function parseV4(text: string): number {
  let value = 0;
  let part = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x2e) {
      if (digits === 0 || dots === 3) return -1;
      value = value * 256 + part;
      part = 0;
      digits = 0;
      dots++;
    } else if (c >= 0x30 && c <= 0x39) {
      // No leading zeros: "010" is octal to some parsers and decimal to others.
      if (digits > 0 && part === 0) return -1;
      part = part * 10 + (c - 0x30);
      if (++digits > 3 || part > 255) return -1;
    } else {
      return -1;
    }
  }
  if (dots !== 3 || digits === 0) return -1;
  return value * 256 + part;
}

function parseV6(text: string): Uint16Array | null {
  const words = new Uint16Array(8);
  const doubleColon = text.indexOf('::');
  if (doubleColon !== -1 && text.indexOf('::', doubleColon + 1) !== -1) return null;
  const head = doubleColon === -1 ? text : text.slice(0, doubleColon);
  const tail = doubleColon === -1 ? '' : text.slice(doubleColon + 2);
  const headParts = head === '' ? [] : head.split(':');
  const tailParts = tail === '' ? [] : tail.split(':');
  const parts = [...headParts, ...tailParts];
  // An embedded IPv4 tail (::ffff:1.2.3.4) takes two words.
  let v4Tail = -1;
  const last = parts[parts.length - 1];
  if (last !== undefined && last.indexOf('.') !== -1) {
    v4Tail = parseV4(last);
    if (v4Tail < 0) return null;
  }
  const wordCount = parts.length + (v4Tail >= 0 ? 1 : 0);
  if (doubleColon === -1 ? wordCount !== 8 : wordCount > 7) return null;
  const hexParts = v4Tail >= 0 ? parts.length - 1 : parts.length;
  const values: number[] = [];
  for (let i = 0; i < hexParts; i++) {
    const part = parts[i]!;
    if (!/^[0-9a-fA-F]{1,4}$/.test(part)) return null;
    values.push(parseInt(part, 16));
  }
  if (v4Tail >= 0) values.push(v4Tail >>> 16, v4Tail & 0xffff);
  const headWords = doubleColon === -1 ? values.length : headParts.length;
  for (let i = 0; i < headWords; i++) words[i] = values[i]!;
  const tailWords = values.length - headWords;
  for (let i = 0; i < tailWords; i++) words[8 - tailWords + i] = values[headWords + i]!;
  return words;
}
