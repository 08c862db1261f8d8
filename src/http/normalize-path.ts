/**
 * Request path normalization (docs/reference/accept.md#path-normalization), done before routing; the normalized path is also
 * what is forwarded upstream.
 *
 * - percent-encoded unreserved characters (ALPHA DIGIT - . _ ~) are decoded, other escapes are kept
 *   with upper-case hex, so `%2F` never splits a segment;
 * - a raw character a target may hold but an RFC 3986 path may not (see MUST_ESCAPE) is escaped, so
 *   `/q"uote` and `/q%22uote` are one path, and the path forwarded upstream is a valid URI path;
 * - dot-segments are removed (RFC 3986 5.2.4) after that decoding, so `%2E%2E` cannot sneak past;
 * - one trailing slash is removed unless the path is "/".
 *
 * Returns null for what must be a 400: no leading "/", a malformed escape, `..` above the root.
 */
export function normalizePath(raw: string): string | null {
  if (raw.charCodeAt(0) !== 0x2f) return null;
  // Fast paths, no allocation: a plain path in one regex pass; or nothing to decode or escape and no
  // dot-segment (a "\\", a segment starting with ".", a byte outside visible ASCII).
  if (PLAIN_PATH.test(raw) || (!TO_REWRITE.test(raw) && !hasDotSegment(raw))) return dropTrailingSlash(raw);
  const decoded = normalizeLiteral(raw);
  if (decoded === null) return null;
  const resolved = removeDotSegments(decoded);
  return resolved === null ? null : dropTrailingSlash(resolved);
}

/**
 * Visible ASCII that a request target may hold raw (isTargetText) but that RFC 3986 allows in a path
 * only percent-encoded (it is no pchar and no "/"): `"` `<` `>` `[` `]` `^` `` ` `` `{` `|` `}`. Path
 * normalization and template literals write each as its escape (upper-case hex), which is how WHATWG
 * URL based clients (browsers, fetch, undici, Python requests) send most of them. Not "\\": it has its
 * own rule (encodedSlashes); `#`, `%`, `?` and space are refused or mean something else.
 */
const MUST_ESCAPE = '"<>[]^`{|}';

/** "%" or a MUST_ESCAPE character: something to rewrite, found in one scan. */
const TO_REWRITE = /[%"<>[\]^`{|}]/;

const ESCAPED: Record<string, string> = {};
for (const c of MUST_ESCAPE) ESCAPED[c] = '%' + c.charCodeAt(0).toString(16).toUpperCase();

/**
 * Segments of visible ASCII without "#", "%", "\\" or a MUST_ESCAPE character, none starting with ".":
 * a path every check of the accept phase lets through unchanged (isTargetText, no slash lookalike,
 * nothing to decode or escape, no dot-segment), so that its normalized form is
 * dropTrailingSlash(path). One regex pass instead of a character loop and four indexOf scans
 * (callgrind: -1,400 instructions a request of the bench's path).
 * A path it refuses is not wrong, only not plain: the checks then run one by one.
 */
const PLAIN_PATH = /^(?:\/(?:[\x21\x24\x26-\x2d\x30-\x3b\x3d\x3f-\x5a\x5f\x61-\x7a\x7e][\x21\x24\x26-\x2e\x30-\x3b\x3d\x3f-\x5a\x5f\x61-\x7a\x7e]*)?)+$/;

export function isPlainPath(path: string): boolean {
  return PLAIN_PATH.test(path);
}

/**
 * Decode escapes of unreserved characters, upper-case the rest, escape a raw MUST_ESCAPE character;
 * null on a malformed escape.
 */
export function normalizeLiteral(text: string): string | null {
  if (!TO_REWRITE.test(text)) return text;
  let out = '';
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x25 /* % */) {
      const hi = hexValue(text.charCodeAt(i + 1));
      const lo = hexValue(text.charCodeAt(i + 2));
      if (hi < 0 || lo < 0) return null;
      const code = hi * 16 + lo;
      out += text.slice(from, i) + (isUnreserved(code) ? String.fromCharCode(code) : '%' + text.slice(i + 1, i + 3).toUpperCase());
      i += 2;
      from = i + 1;
    } else {
      const escaped = c < 0x7f ? ESCAPED[text[i]!] : undefined;
      if (escaped === undefined) continue;
      out += text.slice(from, i) + escaped;
      from = i + 1;
    }
  }
  return out + text.slice(from);
}

function hasDotSegment(path: string): boolean {
  for (let i = path.indexOf('/.'); i !== -1; i = path.indexOf('/.', i + 1)) {
    const next = path.charCodeAt(i + 2);
    if (Number.isNaN(next) || next === 0x2f) return true; // "/." segment
    if (next === 0x2e) {
      const after = path.charCodeAt(i + 3);
      if (Number.isNaN(after) || after === 0x2f) return true; // "/.." segment
    }
  }
  return false;
}

/** Segment-wise RFC 3986 dot-segment removal that refuses to climb above the root. */
function removeDotSegments(path: string): string | null {
  const input = path.split('/'); // input[0] is "" (leading slash)
  const output: string[] = [];
  const last = input.length - 1;
  for (let i = 1; i <= last; i++) {
    const segment = input[i]!;
    if (segment === '.') {
      if (i === last) output.push('');
    } else if (segment === '..') {
      if (output.length === 0) return null;
      output.pop();
      if (i === last) output.push('');
    } else {
      output.push(segment);
    }
  }
  return '/' + output.join('/');
}

/** `/a/b/` → `/a/b`; the root stays `/`. */
export function dropTrailingSlash(path: string): string {
  if (path.length < 2 || path.charCodeAt(path.length - 1) !== 0x2f) return path;
  // Every trailing slash: the router reads one as absent, so a path left with one would be routed
  // without it but forwarded with it.
  let end = path.length - 1;
  while (end > 0 && path.charCodeAt(end - 1) === 0x2f) end--;
  return end === 0 ? '/' : path.slice(0, end);
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  if (c >= 0x61 && c <= 0x66) return c - 0x57;
  return -1;
}

function isUnreserved(c: number): boolean {
  return (
    (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2e || c === 0x5f || c === 0x7e
  );
}
