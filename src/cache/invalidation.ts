/**
 * Which URLs a successful unsafe request invalidates (RFC 9111 4.4): its target, and the URLs of the
 * answer's Location and Content-Location when they have the request's origin (scheme, host, port).
 * A cross-origin one is left alone: a client could otherwise make the cache drop entries of a URL it
 * has no authority over.
 *
 * The request's origin is the one the cache keys it under (requestOrigin in ./key.ts): the whole
 * X-Forwarded-Proto and X-Forwarded-Host values the gateway forwards (its own, or a trusted proxy's).
 * A value no absolute URL can have (a list such as `evil.test, good.test`, a scheme other than http
 * and https, no host) leaves relative references as the only same-origin ones, where taking one item
 * of the list would count URLs of a host the key does not name.
 *
 * A URL is returned as the cache keys a request for it: the reference resolved on its own text (RFC
 * 3986 5.2), the path then normalized as the gateway normalizes request paths, the query as written.
 * The WHATWG URL parser is used for the origin only. Its path and query are not what a request
 * target holds: it percent-encodes `"`, `<`, `>`, `` ` ``, `{`, `}` in a path and `"`, `'`, `<`, `>`
 * in a query, and reads `\` as `/`, where the gateway accepts all of them in a target and the key
 * holds them as sent (a Location naming `?name=O'Brien` dropped `?name=O%27Brien` when its URL was
 * taken from the parser).
 */
import { normalizeLiteral, normalizePath } from '../http/normalize-path.js';
import { fieldValue } from '../http/header-list.js';

export interface InvalidatedUrl {
  readonly path: string;
  readonly query: string;
}

/** True for a status after which an unsafe request invalidates (a non-error one: 2xx, 3xx). */
export function invalidates(status: number): boolean {
  return status >= 200 && status < 400;
}

/**
 * The same-origin URLs named by `responseHeaders`' Location and Content-Location, resolved against the
 * request's URL. `requestHeaders`: what the gateway forwards (with X-Forwarded-Proto / -Host).
 */
export function locationUrls(
  secure: boolean,
  path: string,
  query: string,
  requestHeaders: readonly string[],
  responseHeaders: readonly string[],
): InvalidatedUrl[] {
  const location = fieldValue(responseHeaders, 'location');
  const contentLocation = fieldValue(responseHeaders, 'content-location');
  if (location === undefined && contentLocation === undefined) return [];
  const proto = fieldValue(requestHeaders, 'x-forwarded-proto')?.trim().toLowerCase();
  const claimedHost = fieldValue(requestHeaders, 'x-forwarded-host')?.trim();
  const scheme = proto === undefined || proto === '' ? (secure ? 'https' : 'http') : proto;
  // null: no absolute URL has the request's origin, only references without scheme and host do.
  const origin = (scheme === 'http' || scheme === 'https') && claimedHost !== undefined && claimedHost !== '' && !claimedHost.includes(',') ? originOf(scheme, claimedHost) : null;
  const out: InvalidatedUrl[] = [];
  for (const value of [location, contentLocation]) {
    if (value === undefined) continue;
    const found = resolve(value.trim(), scheme, origin, path, query);
    if (found === null) continue;
    if (!out.some((other) => other.path === found.path && other.query === found.query)) out.push(found);
  }
  return out;
}

/** RFC 3986 appendix B, with the scheme's own grammar (3.1): scheme, authority, path, query; the fragment left out. */
const REFERENCE = /^(?:([A-Za-z][A-Za-z0-9+.-]*):)?(?:\/\/([^/?#]*))?([^?#]*)(?:\?([^#]*))?/;

/**
 * `reference` resolved against the request's URL (RFC 3986 5.2.2; a reference with the request's
 * scheme and no authority, such as `http:/x`, is relative, as the RFC's non-strict parsers and
 * browsers read it), or null when it is of another origin or names no path a request can have.
 */
function resolve(reference: string, baseScheme: string, baseOrigin: string | null, basePath: string, baseQuery: string): InvalidatedUrl | null {
  if (reference === '') return null;
  const parts = REFERENCE.exec(reference)!;
  let scheme = parts[1]?.toLowerCase();
  const authority = parts[2];
  const refPath = parts[3]!;
  const refQuery = parts[4];
  if (scheme === baseScheme && authority === undefined) scheme = undefined;
  let path: string;
  let query = refQuery ?? '';
  if (scheme !== undefined || authority !== undefined) {
    if (authority === undefined || baseOrigin === null || originOf(scheme ?? baseScheme, authority) !== baseOrigin) return null;
    path = refPath === '' ? '/' : refPath;
  } else if (refPath === '') {
    path = basePath;
    if (refQuery === undefined) query = baseQuery;
  } else if (refPath.charCodeAt(0) === 0x2f) {
    path = refPath;
  } else {
    path = basePath.slice(0, basePath.lastIndexOf('/') + 1) + refPath;
  }
  const pathText = targetText(path);
  const queryText = targetText(query);
  const decoded = pathText === null ? null : normalizeLiteral(pathText);
  const normalized = decoded === null ? null : normalizePath(removeDotSegments(decoded));
  return normalized === null || queryText === null ? null : { path: normalized, query: queryText };
}

/**
 * The origin of `scheme://authority` as the URL parser serializes it (case, default port, IDNA), or
 * null when it is not a host, or the parser would end the authority before the text does (a `\` in
 * it): then the parser's host is not the one written.
 */
function originOf(scheme: string, authority: string): string | null {
  let url: URL;
  try {
    url = new URL(`${scheme}://${authority}/`);
  } catch {
    return null;
  }
  return url.pathname === '/' && url.search === '' && url.hash === '' && url.host !== '' ? url.origin : null;
}

/**
 * RFC 3986 5.2.4 on a path that starts with "/" and whose unreserved escapes are decoded (`%2E` is a
 * dot, as normalizePath() reads it): `.` and `..` segments removed, a `..` at the root dropped. A
 * request path that climbs above the root is refused, but a reference that does names the URL without
 * it, which is what a client following it asks for.
 */
function removeDotSegments(path: string): string {
  if (!path.includes('/.')) return path;
  const segments = path.split('/');
  const out: string[] = [];
  const last = segments.length - 1;
  for (let i = 1; i <= last; i++) {
    const segment = segments[i]!;
    if (segment === '.' || segment === '..') {
      if (segment === '..') out.pop();
      if (i === last) out.push('');
    } else {
      out.push(segment);
    }
  }
  return `/${out.join('/')}`;
}

/**
 * A request target holds visible ASCII other than `#` (src/http/request-target.ts): a client sends any
 * other byte of a reference (space, a control, obs-text) percent-encoded, and so it is here. Header
 * values are read as latin1, a character a byte; null for a character that is no byte.
 */
function targetText(text: string): string | null {
  let out = '';
  let from = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c > 0x20 && c < 0x7f) continue;
    if (c > 0xff) return null;
    out += `${text.slice(from, i)}%${(c < 0x10 ? '0' : '') + c.toString(16).toUpperCase()}`;
    from = i + 1;
  }
  return from === 0 ? text : out + text.slice(from);
}
