/**
 * Whether a Host header's value is `uri-host [ ":" port ]` (RFC 9110 7.2, RFC 3986 3.2.2-3.2.3). RFC 9112
 * 3.2 makes any other value a 400: a Host with userinfo (`a@b`), a path, a space or an unbracketed IPv6
 * address would be read differently by the next hop (an upstream that rebuilds the URL from it, a
 * cache keyed on it). An empty value is allowed: it is what a client sends for a target without an
 * authority.
 *
 *   host     = IP-literal / IPv4address / reg-name
 *   IP-literal = "[" ( IPv6address / IPvFuture ) "]"
 *   reg-name = *( unreserved / pct-encoded / sub-delims )
 *   port     = *DIGIT
 *
 * IPv4address is a reg-name too, so only the bracketed form needs a rule of its own; its inside is
 * checked for its characters (hex digits, ":" and "." for IPv6; "v", hex, "." and the IPvFuture set),
 * not parsed as an address: a malformed address in brackets is the upstream's to refuse, and cannot
 * be read as anything but a host.
 */

/** unreserved / sub-delims (RFC 3986 2.2-2.3); "%" is checked apart (pct-encoded). */
const REG_NAME = charTable("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=");
const IPV6 = charTable('0123456789ABCDEFabcdef:.');
/** IPvFuture after "v" HEXDIG+ ".": unreserved / sub-delims / ":". */
const IPV_FUTURE = charTable("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:");
const HEX = charTable('0123456789ABCDEFabcdef');

/** The last value found valid: a connection's requests, and most clients', carry the same Host. */
let lastValid = '';

export function isValidHost(value: string): boolean {
  if (value === lastValid) return true;
  const end = value.length;
  let at = value.charCodeAt(0) === 0x5b ? ipLiteralEnd(value) : regNameEnd(value);
  if (at === -1) return false;
  // port = ":" *DIGIT
  if (at < end) {
    if (value.charCodeAt(at) !== 0x3a) return false;
    for (at++; at < end; at++) {
      const c = value.charCodeAt(at);
      if (c < 0x30 || c > 0x39) return false;
    }
  }
  lastValid = value;
  return true;
}

/** Where a reg-name that starts the value ends (at ":" or the end), or -1 for a bad character or escape. */
function regNameEnd(value: string): number {
  const end = value.length;
  for (let at = 0; at < end; at++) {
    const c = value.charCodeAt(at);
    if (c === 0x3a) return at;
    if (c === 0x25) {
      if (at + 2 >= end || !HEX[value.charCodeAt(at + 1)] || !HEX[value.charCodeAt(at + 2)]) return -1;
      at += 2;
    } else if (c > 0x7f || !REG_NAME[c]) {
      return -1;
    }
  }
  return end;
}

/** Where a bracketed IP-literal that starts the value ends (after "]"), or -1. */
function ipLiteralEnd(value: string): number {
  const close = value.indexOf(']');
  if (close < 2) return -1;
  const first = value.charCodeAt(1);
  if (first === 0x76 || first === 0x56) {
    // IPvFuture: "v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" )
    let at = 2;
    while (at < close && HEX[value.charCodeAt(at)]) at++;
    if (at === 2 || at >= close - 1 || value.charCodeAt(at) !== 0x2e) return -1;
    for (at++; at < close; at++) if (!IPV_FUTURE[value.charCodeAt(at)]) return -1;
    return close + 1;
  }
  for (let at = 1; at < close; at++) if (!IPV6[value.charCodeAt(at)]) return -1;
  return close + 1;
}

function charTable(chars: string): Uint8Array {
  const table = new Uint8Array(128);
  for (let i = 0; i < chars.length; i++) table[chars.charCodeAt(i)] = 1;
  return table;
}
