/**
 * Byte classes of RFC 9110/9112 as 256-entry tables, so the parser's inner loops are one load and
 * one compare per byte.
 */

/** Bytes the parsers compare against: a const enum, so each use compiles to a literal (an imported const is a module-cell load with a hole check per use). */
export const enum Byte {
  CR = 0x0d,
  LF = 0x0a,
  SP = 0x20,
  HTAB = 0x09,
  COLON = 0x3a,
}

/** tchar: the characters of a header name (token). */
export const TOKEN = new Uint8Array(256);
for (const ch of "!#$%&'*+-.^_`|~") TOKEN[ch.charCodeAt(0)] = 1;
for (let c = 0x30; c <= 0x39; c++) TOKEN[c] = 1;
for (let c = 0x41; c <= 0x5a; c++) TOKEN[c] = 1;
for (let c = 0x61; c <= 0x7a; c++) TOKEN[c] = 1;

/** What a byte is inside a field value or reason phrase. */
export const enum ValueByte {
  /** NUL, CR, LF, other controls, DEL: not allowed. */
  Invalid = 0,
  /** VCHAR or obs-text: counts toward the trimmed value. */
  Visible = 1,
  /** SP or HTAB: allowed, trimmed at the ends. */
  Space = 2,
}
export const VALUE = new Uint8Array(256);
for (let c = 0x21; c <= 0x7e; c++) VALUE[c] = ValueByte.Visible;
for (let c = 0x80; c <= 0xff; c++) VALUE[c] = ValueByte.Visible;
VALUE[Byte.SP] = ValueByte.Space;
VALUE[Byte.HTAB] = ValueByte.Space;

/** qdtext of a quoted-string (chunk extension values): VALUE minus DQUOTE and backslash. */
export const QDTEXT = new Uint8Array(256);
for (let c = 0; c < 256; c++) QDTEXT[c] = VALUE[c] === ValueByte.Invalid || c === 0x22 || c === 0x5c ? 0 : 1;

/** `text` is a token (RFC 9110 5.6.2): one or more tchar. */
export function isToken(text: string): boolean {
  if (text.length === 0) return false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c > 0xff || TOKEN[c] === 0) return false;
  }
  return true;
}

/** `text` may be sent as a field value: VCHAR, obs-text, SP and HTAB only (no CR, LF, NUL or other control). */
export function isFieldValue(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c > 0xff || VALUE[c] === ValueByte.Invalid) return false;
  }
  return true;
}

/** Hex digit values, -1 for anything else. */
export const HEX = new Int8Array(256).fill(-1);
for (let c = 0; c <= 9; c++) HEX[0x30 + c] = c;
for (let c = 0; c < 6; c++) {
  HEX[0x41 + c] = 10 + c;
  HEX[0x61 + c] = 10 + c;
}
