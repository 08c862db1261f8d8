/**
 * What a request target may hold: visible ASCII (RFC 3986 characters and percent-escapes) and no
 * `#`. uWS passes raw bytes such as UTF-8 through, and a fragment too; forwarded, an upstream would
 * reject the first and cut the second off the path it serves (so `/users/7#x` routed as the id `7#x`
 * would reach it as `/users/7`). The gateway answers 400 itself and forwards nothing.
 */
export function isTargetText(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x21 || c > 0x7e || c === 0x23) return false;
  }
  return true;
}

/**
 * %2F or %5C (any case), or a raw "\\": an encoded "/" or a backslash, which an upstream may read as a
 * segment boundary (many servers on Windows, and URL parsers that follow the WHATWG rules, treat "\\"
 * as "/").
 */
export function hasSlashLookalike(path: string): boolean {
  if (path.indexOf('\\') !== -1) return true;
  for (let i = path.indexOf('%'); i !== -1; i = path.indexOf('%', i + 1)) {
    const hi = path.charCodeAt(i + 1);
    const lo = path.charCodeAt(i + 2) | 0x20;
    if ((hi === 0x32 && lo === 0x66) || (hi === 0x35 && lo === 0x63)) return true;
  }
  return false;
}
