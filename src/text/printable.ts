/**
 * What a terminal or a log viewer would act on instead of showing: C0 and C1 controls (ESC starts
 * a terminal sequence, CR and LF split a line), bidi overrides and isolates (U+202E shows text
 * reversed), zero-width and invisible characters (U+200B, U+2060, U+FEFF), the line and paragraph
 * separators, and lone surrogates (half a character, which no UTF-8 output can hold).
 */
const UNPRINTABLE =
  // eslint-disable-next-line no-control-regex -- matching control characters is the point
  /[\u0000-\u001f\u007f-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ufff9-\ufffb]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

/**
 * Text that came from input (a config key, a doc's template, a file name, a command-line argument) made
 * safe to echo on a terminal or a log line: each character above becomes `\uXXXX`, the rest is kept.
 * The result is still valid inside a JSON string with the same meaning, so a JSON line may be passed
 * through whole. Idempotent.
 */
export function printable(text: string): string {
  UNPRINTABLE.lastIndex = 0;
  if (!UNPRINTABLE.test(text)) return text;
  return text.replace(UNPRINTABLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
