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
 * of the list would count URLs of a host the key does not name. A URL is returned as the cache keys
 * it: the path normalized as the gateway normalizes request paths, and the query.
 */
import { normalizePath } from '../http/normalize-path.js';
import { fieldValue } from '../http/header-list.js';

export interface InvalidatedUrl {
  readonly path: string;
  readonly query: string;
}

/** Stands for the request's host when it named none: only relative references resolve to it. */
const NO_HOST = 'request-without-host.invalid';

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
  const target = `${path}${query === '' ? '' : `?${query}`}`;
  let base: URL | null = null;
  if ((scheme === 'http' || scheme === 'https') && claimedHost !== undefined && claimedHost !== '' && !claimedHost.includes(',')) {
    try {
      base = new URL(`${scheme}://${claimedHost}${target}`);
    } catch {
      // A host the URL parser refuses: relative references only.
    }
  }
  base ??= new URL(`http://${NO_HOST}${target}`);
  const out: InvalidatedUrl[] = [];
  for (const value of [location, contentLocation]) {
    if (value === undefined) continue;
    const url = sameOrigin(value.trim(), base);
    if (url === null) continue;
    const normalized = normalizePath(url.pathname);
    if (normalized === null) continue;
    const found = { path: normalized, query: url.search === '' ? '' : url.search.slice(1) };
    if (!out.some((other) => other.path === found.path && other.query === found.query)) out.push(found);
  }
  return out;
}

function sameOrigin(reference: string, base: URL): URL | null {
  if (reference === '') return null;
  let url: URL;
  try {
    url = new URL(reference, base);
  } catch {
    return null;
  }
  return url.origin === base.origin ? url : null;
}
