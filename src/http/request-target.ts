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
