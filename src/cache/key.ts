/**
 * Cache keys (docs/reference/response-cache.md#keys-and-vary): the request's origin as the upstream is
 * told it (X-Forwarded-Proto and X-Forwarded-Host, the other forwarding fields a trusted proxy's
 * request carries: requestOrigin), the normalized path and the raw query, then the
 * endpoint: its canonical template (identifiers erased), so GET /items/{id} and DELETE /items/{itemId}
 * address the same entries. Keys are printable: a remote store shows them as they are. The URL comes
 * first so that every entry of one URL (under any endpoint, every variant) shares the prefix
 * `<origin><path>[?query] `: invalidating a URL (an unsafe request's target, its Location) needs no
 * routing, one range of an ordered store.
 *
 * The origin is in the key because the upstream is sent it: an answer built from X-Forwarded-Host
 * (absolute links, redirects) would otherwise be stored under a key any client could reach with
 * another Host, and served to the clients of every host (cache poisoning).
 *
 * With virtual hosts the origin starts with the label of the set of upstreams the request was routed
 * among (`[label]http://...`): routing goes by the client's Host, the origin by what the upstream is
 * told, and a trusted proxy may send a Host and an X-Forwarded-Host that differ; without the label, an
 * answer of one host's upstreams would be stored under another host's key. In the URL part, so that
 * an invalidation drops the entries of its own host set only. No origin starts with "[".
 *
 * A URL whose answer varies (Vary) keeps a VaryIndex under its primary key and each variant under
 * `<primary>\n<name>=<value>\n...`, the values of the named request headers ("<name>" alone when the
 * request has none). Credentials never appear in a key or a stored record: the values of
 * Authorization and Cookie are replaced by their SHA-256 digest, and so are apiKeyAuth's keys, in its
 * header (the cache's view of the request, response-cache.ts) and in its query parameter (the
 * query part of the key) when hideCredentials leaves them to the upstream.
 */
import { createHash } from 'node:crypto';
import { fieldValue } from '../http/header-list.js';

let keyOrigin = '';
let keyCanonical = '';
let keyPath = '';
let keyQuery = '';
let lastKey = '';

/**
 * Primary key of a request for `canonical` (the route's canonical template); `origin` from requestOrigin.
 * The last key is kept: a hot entry's hits repeat their URL, and a key made before is one string
 * already hashed by the stores' maps, where a new one is built, flattened and hashed again (callgrind:
 * about 3,000 instructions a hit). Another URL costs the compares.
 */
export function primaryKey(origin: string, canonical: string, path: string, query: string): string {
  if (path === keyPath && query === keyQuery && origin === keyOrigin && canonical === keyCanonical) return lastKey;
  // One template, not urlPrefix() and a concatenation: this runs on every hit.
  const key = query === '' ? `${origin}${path} ${canonical}` : `${origin}${path}?${query} ${canonical}`;
  keyOrigin = origin;
  keyCanonical = canonical;
  keyPath = path;
  keyQuery = query;
  return (lastKey = key);
}

/**
 * What every key of a URL starts with: origin, path and query (visible ASCII only, so no space) and a
 * space. No key of another URL starts with it.
 */
export function urlPrefix(origin: string, path: string, query: string): string {
  return query === '' ? `${origin}${path} ` : `${origin}${path}?${query} `;
}

/** urlPrefix() of the request a primary key was made for (the URL, up to and with its space). */
export function urlOfKey(primary: string): string {
  return primary.slice(0, primary.indexOf(' ') + 1);
}

let lastProto: string | undefined;
let lastHost: string | undefined;
let lastSecure = false;
let lastExtra = '';
let lastHostSet = '';
let lastOrigin = 'http://';

/**
 * The origin part of a key: the request's origin as the upstream is told it, in full. `proto` and
 * `host` are the whole X-Forwarded-Proto and X-Forwarded-Host values the upstream gets (a trusted
 * proxy's lists included: an upstream that reads the first item of `evil.test, good.test` must not
 * have its answer filed under `good.test`); `extra` the other forwarding fields it gets
 * (forwardingField()). A plain `http`/`https` (or none: the connection's) makes the scheme; any other
 * proto value is kept beside it. The host is lower-cased, its default port dropped (`a.test:80` is
 * `http://a.test`, RFC 9110 4.2.3), and percent-encoded when it holds a character a host cannot
 * have, so no host runs into the path. `hostSet`: the route's (Route.hostSet), '' without virtual
 * hosts. The last answer is kept: requests mostly repeat their origin.
 */
export function requestOrigin(secure: boolean, proto: string | undefined, host: string | undefined, extra = '', hostSet = ''): string {
  if (proto === lastProto && host === lastHost && secure === lastSecure && extra === lastExtra && hostSet === lastHostSet) return lastOrigin;
  const connection = secure ? 'https' : 'http';
  const claimed = proto?.trim().toLowerCase();
  const scheme = claimed === undefined || claimed === '' ? connection : claimed === 'https' || claimed === 'http' ? claimed : `${connection}+${encodeURIComponent(claimed)}`;
  let hostPart = (host ?? '').trim().toLowerCase();
  const defaultPort = scheme === 'https' ? ':443' : scheme === 'http' ? ':80' : '';
  if (defaultPort !== '' && hostPart.endsWith(defaultPort)) hostPart = hostPart.slice(0, -defaultPort.length);
  const origin = `${hostSet === '' ? '' : `[${hostSet}]`}${scheme}://${PLAIN_HOST.test(hostPart) ? hostPart : encodeURIComponent(hostPart)}${extra === '' ? '' : encodeURIComponent(extra)}`;
  lastProto = proto;
  lastHost = host;
  lastSecure = secure;
  lastExtra = extra;
  lastHostSet = hostSet;
  return (lastOrigin = origin);
}

/**
 * Whether a request header is a forwarding field the key must hold beside X-Forwarded-Proto and -Host:
 * the other X-Forwarded-* fields (Port, Prefix, Ssl, ...: frameworks build links from them) and
 * Forwarded. X-Forwarded-For is not (it names the client, and would make an entry per client); the
 * gateway passes these on from a trusted proxy only (docs/reference/accept.md#trusted-proxies).
 */
export function isKeyedForwardingField(name: string): boolean {
  return name === 'forwarded' || (name.length > 12 && name.charCodeAt(0) === 0x78 && name.startsWith('x-forwarded-') && name !== 'x-forwarded-for' && name !== 'x-forwarded-host' && name !== 'x-forwarded-proto');
}

/** `;name=value` of a keyed forwarding field; Forwarded without its `for=` parameters (they name clients). */
export function forwardingField(name: string, value: string): string {
  if (name !== 'forwarded') return `;${name}=${value}`;
  const elements: string[] = [];
  for (const element of value.split(',')) {
    const kept: string[] = [];
    for (const pair of element.split(';')) {
      const trimmed = pair.trim();
      if (trimmed !== '' && !trimmed.toLowerCase().startsWith('for=')) kept.push(trimmed);
    }
    if (kept.length > 0) elements.push(kept.join(';'));
  }
  return elements.length === 0 ? '' : `;forwarded=${elements.join(',')}`;
}

const PLAIN_HOST = /^[a-z0-9.\-_~:[\]]*$/;

/** The header names a Vary value lists (lower-case, in order, each once); '*' when it holds "*". */
export function varyNames(vary: string): string[] | '*' {
  const names: string[] = [];
  for (const part of vary.split(',')) {
    const name = part.trim().toLowerCase();
    if (name === '') continue;
    if (name === '*') return '*';
    if (!names.includes(name)) names.push(name);
  }
  return names;
}

const SENSITIVE = new Set(['authorization', 'cookie', 'proxy-authorization']);

/**
 * A request header's value as the cache compares and keeps it: all values joined, and the digest of
 * a credential instead of the credential. Undefined when the request has none.
 */
export function comparedValue(headers: readonly string[], name: string): string | undefined {
  const value = name === 'cookie' ? cookieValue(headers) : fieldValue(headers, name);
  if (value === undefined || !SENSITIVE.has(name)) return value;
  return credentialDigest(value);
}

/** What a key or a stored record keeps of a credential: its SHA-256 digest, never the credential. */
export function credentialDigest(value: string): string {
  return `sha256:${createHash('sha256').update(value, 'latin1').digest('base64url')}`;
}

/** Whether comparedValue() already keeps `name`'s value as a digest. */
export function isSensitiveHeader(name: string): boolean {
  return SENSITIVE.has(name);
}

/**
 * Cookie lines joined as a server reads them, with "; " (RFC 6265 5.4; HTTP/2 splits them so, RFC 9113
 * 8.2.3), not with ", ": two lines `a=1` and `b=2` are one cookie string `a=1; b=2`, and a line
 * `a=1, b=2` is another.
 */
function cookieValue(headers: readonly string[]): string | undefined {
  let value: string | undefined;
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i] === 'cookie') value = value === undefined ? headers[i + 1] : `${value}; ${headers[i + 1]}`;
  }
  return value;
}

/** The key of the variant of `primary` that a request with `headers` selects. */
export function variantKey(primary: string, names: readonly string[], headers: readonly string[]): string {
  let key = primary;
  for (const name of names) {
    const value = comparedValue(headers, name);
    key += value === undefined ? `\n${name}` : `\n${name}=${value}`;
  }
  return key;
}
