/**
 * A request target may only hold visible ASCII (RFC 3986 characters and percent-escapes). uWS passes
 * raw bytes such as UTF-8 through; forwarded, an upstream would reject them, so the gateway answers
 * 400 itself and forwards nothing.
 */
export function isVisibleAscii(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

/** %2F or %5C, any case: an encoded "/" or "\\" that an upstream may decode into a segment boundary. */
export function hasEncodedSlash(path: string): boolean {
  for (let i = path.indexOf('%'); i !== -1; i = path.indexOf('%', i + 1)) {
    const hi = path.charCodeAt(i + 1);
    const lo = path.charCodeAt(i + 2) | 0x20;
    if ((hi === 0x32 && lo === 0x66) || (hi === 0x35 && lo === 0x63)) return true;
  }
  return false;
}
