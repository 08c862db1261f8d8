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
 * Text as a request target can carry it: a character no target holds raw (what isTargetText refuses:
 * outside visible ASCII, or `#`, docs/reference/accept.md#head-checks) becomes its UTF-8
 * percent-escapes, the form clients send. Template literals (routing/template.ts: written raw,
 * `/u/é/{id}` from a doc could never be matched, `é` on the wire being a 400 and `%C3%A9` staying
 * encoded through path normalization) and the configured built-in paths (config/semantic-checks.ts).
 */
export function sendableText(text: string): string {
  let out = '';
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x21 && c <= 0x7e && c !== 0x23) continue;
    // A surrogate pair is one character: both halves are escaped together, as its four UTF-8 bytes.
    const end = c >= 0xd800 && c <= 0xdbff && i + 1 < text.length ? i + 2 : i + 1;
    out += text.slice(from, i) + escapeUtf8(text.slice(i, end));
    from = end;
    i = end - 1;
  }
  return from === 0 ? text : out + text.slice(from);
}

/** UTF-8 percent-escapes, upper-case hex (as path normalization writes escapes); a lone surrogate as U+FFFD's. */
function escapeUtf8(character: string): string {
  let bytes = '';
  for (const byte of Buffer.from(character, 'utf8')) bytes += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  return bytes;
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
