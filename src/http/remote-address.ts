const latin1 = new TextDecoder('latin1');
const V4_MAPPED_PREFIX = '0000:0000:0000:0000:0000:ffff:';

/**
 * The peer address uWS reports as text, with IPv4-mapped IPv6 ("0000:…:ffff:7f00:0001", what a
 * dual-stack "::" listener gives for IPv4 clients) turned back into dotted IPv4.
 */
export function remoteAddressText(raw: ArrayBuffer): string {
  const text = latin1.decode(raw);
  if (text.length !== 39 || !text.startsWith(V4_MAPPED_PREFIX)) return text;
  const high = parseInt(text.slice(30, 34), 16);
  const low = parseInt(text.slice(35, 39), 16);
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
}
