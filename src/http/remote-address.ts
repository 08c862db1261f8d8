const latin1 = new TextDecoder('latin1');
const V4_MAPPED_PREFIX = '0000:0000:0000:0000:0000:ffff:';

/** The last address decoded: consecutive requests mostly come from the same few peers. */
let lastRaw: Uint8Array | null = null;
let lastText = '';

/**
 * The peer address uWS reports as text, with IPv4-mapped IPv6 ("0000:…:ffff:7f00:0001", what a
 * dual-stack "::" listener gives for IPv4 clients) turned back into dotted IPv4. The same bytes as the
 * previous call give the previous string without decoding again.
 */
export function remoteAddressText(raw: ArrayBuffer): string {
  const bytes = new Uint8Array(raw);
  const last = lastRaw;
  if (last !== null && last.length === bytes.length) {
    let same = true;
    for (let i = 0; i < bytes.length; i++) {
      if (bytes[i] !== last[i]) {
        same = false;
        break;
      }
    }
    if (same) return lastText;
  }
  // A copy: some builds may hand out memory they reuse.
  lastRaw = bytes.slice();
  lastText = decode(bytes);
  return lastText;
}

function decode(bytes: Uint8Array): string {
  const text = latin1.decode(bytes);
  if (text.length !== 39 || !text.startsWith(V4_MAPPED_PREFIX)) return text;
  const high = parseInt(text.slice(30, 34), 16);
  const low = parseInt(text.slice(35, 39), 16);
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
}
