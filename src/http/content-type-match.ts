import { createRequire } from 'node:module';
import type TypeIs from 'type-is';

/**
 * Whether a request's Content-Type is one of an endpoint's documented `consumes` media types
 * (routing/negotiate.ts; docs/reference/routing.md#content-negotiation-415-406).
 *
 * The answers are type-is's (`typeis.is(contentType, documented) !== false`, type-is 2.x), which the
 * gateway used until this module: the value's media type, its parameters dropped, lowercased, must be a
 * valid type/subtype (else nothing matches), and a documented type matches it exactly, by a `*` type or
 * subtype, or by a structured suffix (`application/*+json`; `+json` is `*\/*+json`). A documented type
 * is compared as written (a caller lowercases and drops parameters first: routing/table.ts toTarget).
 *
 * Why not type-is: loading it loads mime-types, which reads and indexes mime-db's JSON, and that cost
 * 20-25 ms of CPU in every worker and 40-60 ms in the primary wherever the compile task module loads
 * (CPU profiles of a gateway start), only to expand shorthands like `json`. Shorthands without a slash
 * (other than `urlencoded` and `multipart`, handled here) are rare in a document: for them, and only
 * then, type-is itself is loaded (lazily, at run time, never bundled) to expand them as it always did;
 * so it stays a dependency. Importing dist/bundle/compile-task.mjs in a fresh process took 61-79 ms of
 * CPU (median 66) with type-is bundled and 25-46 ms (median 26) without (15 of each, alternated, on
 * this project's 2-core machine under other load).
 * test/http/content-type-match.test.ts compares this with type-is over generated values.
 *
 * An empty `documented` matches nothing (type-is answers the type itself): negotiate.ts keeps a target
 * that lists no `consumes` without asking.
 */
export function contentTypeMatches(contentType: string, documented: readonly string[]): boolean {
  const actual = requestMediaType(contentType);
  if (actual === undefined) return false;
  for (const type of documented) {
    const expected = isShorthand(type) ? expand(type) : type;
    if (expected !== false && mediaTypeMatch(expected, actual)) return true;
  }
  return false;
}

/**
 * Loads now what matching against `documented` will need (type-is, when one is a shorthand it expands
 * through mime-db), so that a route's first request does not pay for it. Nothing to load otherwise.
 */
export function prepareShorthands(documented: readonly string[]): void {
  if (documented.some((type) => isShorthand(type) && expandsThroughMimeDb(type))) loadTypeIs();
}

/** Media-typer's rule (RFC 6838 restricted names), the one type-is checks the request's type with. */
const MEDIA_TYPE = /^[A-Za-z0-9][A-Za-z0-9!#$&^_-]{0,126}\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}$/;
const SP = 0x20;
const HTAB = 0x09;

/**
 * The media type of a Content-Type value as type-is reads it (content-type's `parse` without
 * parameters, then media-typer's `test`): what comes before the first `;`, SP and HTAB trimmed,
 * lowercased; undefined when that is not a valid type/subtype.
 */
export function requestMediaType(value: string): string | undefined {
  let end = value.indexOf(';');
  if (end === -1) end = value.length;
  let start = 0;
  while (start < end && isOws(value.charCodeAt(start))) start++;
  while (end > start && isOws(value.charCodeAt(end - 1))) end--;
  const type = value.slice(start, end).toLowerCase();
  return MEDIA_TYPE.test(type) ? type : undefined;
}

function isOws(code: number): boolean {
  return code === SP || code === HTAB;
}

/** type-is's `match`: `actual` is a valid lowercase type/subtype (one slash). */
function mediaTypeMatch(expected: string, actual: string): boolean {
  if (expected === actual) return true;
  const slash = expected.indexOf('/');
  if (slash === -1 || expected.indexOf('/', slash + 1) !== -1) return false;
  const actualSlash = actual.indexOf('/');
  const type = expected.slice(0, slash);
  if (type !== '*' && type !== actual.slice(0, actualSlash)) return false;
  const subtype = expected.slice(slash + 1);
  const actualSubtype = actual.slice(actualSlash + 1);
  // type-is also checks the lengths, which endsWith implies.
  if (subtype.startsWith('*+')) return actualSubtype.endsWith(subtype.slice(1));
  return subtype === '*' || subtype === actualSubtype;
}

/** Not compared as written: `json`, `+json`, `urlencoded`... (and the empty string, which names nothing). */
function isShorthand(type: string): boolean {
  return type[0] === '+' || !type.includes('/');
}

function expandsThroughMimeDb(type: string): boolean {
  return type !== '' && type !== 'urlencoded' && type !== 'multipart' && type[0] !== '+';
}

/** type-is's `normalize` of a shorthand: the media type it stands for, false for none. */
function expand(type: string): string | false {
  if (type === 'urlencoded') return 'application/x-www-form-urlencoded';
  if (type === 'multipart') return 'multipart/*';
  if (type[0] === '+') return `*/*${type}`;
  return type === '' ? false : loadTypeIs().normalize(type);
}

let typeIs: typeof TypeIs | undefined;

/** The slow path: `json`, `html`, `a.xml`... are expanded through mime-db by type-is itself. */
function loadTypeIs(): typeof TypeIs {
  return (typeIs ??= createRequire(import.meta.url)('type-is') as typeof TypeIs);
}

/** Whether the slow path has loaded type-is in this process (tests). */
export function shorthandsLoaded(): boolean {
  return typeIs !== undefined;
}
