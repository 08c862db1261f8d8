/**
 * Whether an upstream answer may be stored, by RFC 9111 shared-cache rules as http-cache-semantics
 * implements them, plus the stricter ones of docs/reference/response-cache.md#what-is-stored:
 *
 * - never with Set-Cookie (the library allows it with `public`), never with `Vary: *` in any position;
 * - only an explicit lifetime counts (max-age, s-maxage, Expires): no heuristic from Last-Modified,
 *   no implicit day for `immutable`; `defaultTtlMs` > 0 gives a 200 without one that lifetime
 *   (rounded up to whole seconds, HTTP's unit);
 * - a request with Authorization only when the answer is `public` or has `s-maxage` or `must-revalidate`.
 *
 * The library treats must-revalidate as "never reuse without revalidating", even while fresh; RFC
 * 9111 5.2.2.2 only forbids reusing it once stale. This cache never revalidates, so the policy is
 * made from a view of the headers without must-revalidate / proxy-revalidate (which also keeps them
 * from allowing an authenticated answer to be stored), and StoredResponse.mustRevalidate keeps such an
 * entry from ever being served stale.
 */
import CachePolicy from 'http-cache-semantics';
import { parseDictionary } from 'structured-headers';
import { formatHttpDate, parseHttpDate } from './http-date.js';
import { comparedValue, varyNames } from './key.js';
import { hasDirective } from './record.js';
import { fieldValue } from '../http/header-list.js';

/** Heuristic freshness (RFC 9111 4.2.2): a share of the time since Last-Modified, at most maxMs. */
export interface Heuristic {
  readonly maxMs: number;
}

/** Statuses heuristically cacheable (RFC 9110 15.1); 206 is never stored here. */
const HEURISTIC_STATUSES = new Set([200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501]);
/** Statuses http-cache-semantics stores without explicit freshness information. */
const LIBRARY_UNDERSTOOD = new Set([200, 203, 204, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 501]);
const EPOCH = formatHttpDate(0);
const NO_TARGETS: readonly string[] = [];
/** What a delta-seconds too large for a cache to represent counts as (RFC 9111 1.2.2). */
const MAX_DELTA_SECONDS = 2147483648;

/**
 * The first targeted field (lower-case names) present and valid (its lines joined), as Cache-Control
 * directives, or undefined. RFC 9213 2.1: a targeted field is a Structured Field Dictionary; one that
 * does not parse as one, or whose lifetime directives are not non-negative Integers (`max-age="60"`),
 * is ignored as a whole, and the next field (at last Cache-Control) applies. It is written back from
 * the parsed dictionary, so a directive given twice counts as its last (RFC 8941 4.2.2: `max-age=3600,
 * max-age=0` is 0), not as Cache-Control's first.
 */
export function targetedValue(headers: readonly string[], targeted: readonly string[]): string | undefined {
  for (const name of targeted) {
    const value = fieldValue(headers, name);
    if (value === undefined) continue;
    const directives = targetedDirectives(value);
    if (directives !== null) return directives;
  }
  return undefined;
}

const INTEGER_DIRECTIVES = ['max-age', 's-maxage', 'stale-while-revalidate', 'stale-if-error'];

/** A targeted field's value as Cache-Control directives (each once), or null when it is not valid. */
function targetedDirectives(value: string): string | null {
  let members: ReturnType<typeof parseDictionary>;
  try {
    members = parseDictionary(value);
  } catch {
    return null;
  }
  for (const name of INTEGER_DIRECTIVES) {
    const member = members.get(name);
    if (member === undefined) continue;
    const item = member[0];
    if (typeof item !== 'number' || !Number.isInteger(item) || item < 0) return null;
  }
  const directives: string[] = [];
  for (const [name, [item]] of members) {
    if (item === true) directives.push(name);
    else if (typeof item === 'string') directives.push(`${name}=${JSON.stringify(item)}`);
    else if (typeof item === 'number' || typeof item === 'boolean') directives.push(`${name}=${String(item)}`);
    else if (item !== null && typeof item === 'object' && 'value' in item && typeof item.value === 'string') directives.push(`${name}=${item.value}`);
    // Inner lists, byte sequences and the like are no cache directive this cache knows: left out.
  }
  return directives.join(', ');
}

const POLICY_OPTIONS: CachePolicy.Options = { shared: true, cacheHeuristic: 0, immutableMinTimeToLive: 0 };

export interface Verdict {
  /** The rules let the answer be stored (X-Cache: MISS); false: they forbid it (BYPASS). */
  storable: boolean;
  /** Its policy when storable and fresh for a while; null: nothing to keep. */
  policy: CachePolicy | null;
  /** Vary names (lower-case); empty when the answer does not vary. */
  vary: readonly string[];
}

const FORBIDDEN: Verdict = { storable: false, policy: null, vary: [] };

/**
 * The verdict on an answer (`status`, end-to-end `headers`, flat, lower-case names) to a GET whose
 * request headers were `requestHeaders`; `url` is the primary key the policy will be matched by.
 */
export function judge(
  url: string,
  requestHeaders: readonly string[],
  status: number,
  headers: readonly string[],
  defaultTtlMs: number,
  heuristic: Heuristic | null = null,
  now = Date.now(),
  targeted: readonly string[] = NO_TARGETS,
): Verdict {
  // A partial answer is never stored (a range is served from a stored whole answer instead); a 304
  // is an answer to a conditional request, not one to keep.
  if (status === 206 || status === 304 || status < 200) return FORBIDDEN;
  const response: CachePolicy.Headers = {};
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    if (name === 'set-cookie') return FORBIDDEN;
    const previous = response[name];
    response[name] = previous === undefined ? headers[i + 1] : `${previous as string}, ${headers[i + 1]}`;
  }
  // Targeted cache control (RFC 9213): the first of the configured fields present replaces
  // Cache-Control for this cache.
  const targetedControl = targetedValue(headers, targeted);
  if (targetedControl !== undefined) {
    response['cache-control'] = targetedControl;
    // RFC 9213 2.2: with a valid targeted field, Cache-Control and Expires are both ignored.
    delete response.expires;
    delete response.pragma;
  }
  readAsTheRfcSays(response, now);
  let vary: readonly string[] = [];
  if (typeof response.vary === 'string') {
    const names = varyNames(response.vary);
    if (names === '*') return FORBIDDEN;
    vary = names;
  }
  const understood = mustUnderstand(response, status);
  if (understood === false) return FORBIDDEN;
  const cacheControl = typeof response['cache-control'] === 'string' ? response['cache-control'] : undefined;
  // RFC 9111 3.5: must-revalidate lets a shared cache store an answer to a request with
  // Authorization, as public and s-maxage do; the view below loses it, so the policy is not told
  // of the credentials (the record's sharedWithAuth says the same).
  const authorizedByRevalidation = cacheControl !== undefined && hasDirective(cacheControl.toLowerCase(), 'must-revalidate');
  if (cacheControl !== undefined) {
    const view = withoutRevalidation(cacheControl);
    if (view === '') delete response['cache-control'];
    else response['cache-control'] = view;
  }
  const request = policyRequest(url, requestHeaders, vary, authorizedByRevalidation);
  const explicit = hasExplicitLifetime(response);
  // RFC 9111 3: any final status may be stored with explicit freshness (or public); the library
  // stores only the statuses it knows. It judges such an answer as a 200 (the record keeps its status).
  const judgedStatus = !LIBRARY_UNDERSTOOD.has(status) && (explicit || hasDirective(lower(response['cache-control']), 'public')) ? 200 : status;
  let policy = new CachePolicy(request, { status: judgedStatus, headers: response }, POLICY_OPTIONS);
  if (!policy.storable()) return FORBIDDEN;
  if (!explicit && heuristic !== null && HEURISTIC_STATUSES.has(status)) {
    const lifetimeMs = heuristicLifetimeMs(response, now, heuristic.maxMs);
    if (lifetimeMs >= 1000) addLifetime(response, Math.floor(lifetimeMs / 1000));
    policy = new CachePolicy(request, { status: judgedStatus, headers: response }, POLICY_OPTIONS);
  } else if (defaultTtlMs > 0 && status === 200 && !explicit) {
    const lifetime = `s-maxage=${Math.ceil(defaultTtlMs / 1000)}`;
    const list = response['cache-control'];
    response['cache-control'] = typeof list === 'string' ? `${list}, ${lifetime}` : lifetime;
    policy = new CachePolicy(request, { status, headers: response }, POLICY_OPTIONS);
  }
  const fresh = policy.maxAge() - policy.age() > 0;
  // Not fresh now, but kept to be revalidated on use (RFC 9111 4.3): an answer with a validator that
  // says `no-cache` (stored, never served without asking the upstream) or has an explicit lifetime
  // already spent. One with no lifetime at all stays unstored (heuristic freshness is opt-in).
  const revalidatable =
    !fresh && (response.etag !== undefined || response['last-modified'] !== undefined) && (explicit || hasDirective(lower(response['cache-control']), 'no-cache'));
  return { storable: true, policy: fresh || revalidatable ? policy : null, vary };
}

/**
 * The request as the policy sees it: the headers its rules and Vary read (credentials as digests),
 * never the whole request (a remote store would keep it).
 */
export function policyRequest(url: string, headers: readonly string[], vary: readonly string[], withoutAuthorization = false): CachePolicy.Request {
  const view: CachePolicy.Headers = {};
  for (const name of withoutAuthorization ? ['cache-control', 'pragma'] : ['cache-control', 'pragma', 'authorization']) {
    const value = comparedValue(headers, name);
    if (value !== undefined) view[name] = value;
  }
  for (const name of vary) {
    const value = comparedValue(headers, name);
    if (value !== undefined) view[name] = value;
  }
  return { method: 'GET', url, headers: view };
}

/**
 * Where http-cache-semantics reads a header differently from RFC 9110/9111, the view it is given is
 * corrected first (each rule has its test in test/cache/cache-rules.test.ts; they could go to the library):
 * - Cache-Control directive names are case-insensitive (RFC 9111 5.2): the library compares them as
 *   written, so `MAX-AGE=60` would be no lifetime.
 * - A lifetime (max-age, s-maxage) counts once, its first occurrence (RFC 9111 4.2.1; the library
 *   takes the last), and its value is delta-seconds (1.2.2: digits only, quoted or not, at most
 *   2^31). Any other value (`1e3`, `1.9`, `2abc`, spaces around `=`, none) makes it 0: invalid
 *   freshness information is stale (4.2.1). The library's parseInt read `2abc` as 2.
 * - Date, Expires and Last-Modified are HTTP-dates (RFC 9110 5.6.7), read strictly (parseHttpDate),
 *   including RFC 850's two-digit years; the library uses Date.parse, which accepts other texts and
 *   reads "94" as 1994 whatever the century. An invalid Expires means already expired (RFC 9111
 *   5.3); an invalid Date or Last-Modified is as if absent.
 * - Age is a non-negative integer (RFC 9111 5.1): anything else ("7200.0", "-1", "1e3") is ignored;
 *   the library's parseInt takes "7200.0" as 7200. One too large is 2^31 (1.2.2), not its digits
 *   written as "1e+23", which the library would read as 1.
 * - The initial age is at least the apparent age, now - Date (RFC 9111 4.2.3); the library uses the
 *   Age header alone, so an answer whose Date is an hour old with max-age=60 would be fresh.
 */
export function readAsTheRfcSays(response: CachePolicy.Headers, now: number): void {
  const cacheControl = response['cache-control'];
  if (typeof cacheControl === 'string') response['cache-control'] = directivesAsTheRfcSays(cacheControl);
  let date: number | null = null;
  if (typeof response.date === 'string') {
    date = parseHttpDate(response.date, now);
    if (date === null) delete response.date;
    else response.date = formatHttpDate(date);
  }
  if (typeof response.expires === 'string') {
    const expires = parseHttpDate(response.expires, now);
    response.expires = expires === null ? EPOCH : formatHttpDate(expires);
  }
  if (typeof response['last-modified'] === 'string') {
    const modified = parseHttpDate(response['last-modified'], now);
    if (modified === null) delete response['last-modified'];
    else response['last-modified'] = formatHttpDate(modified);
  }
  let age = 0;
  if (typeof response.age === 'string') {
    // A list (one line "7200, 0", or several lines joined): the first member counts (RFC 9111 5.1).
    const comma = response.age.indexOf(',');
    const text = (comma === -1 ? response.age : response.age.slice(0, comma)).trim();
    if (/^\d+$/.test(text)) age = Math.min(Number(text), MAX_DELTA_SECONDS);
    delete response.age;
  }
  if (date !== null && now > date) age = Math.max(age, Math.floor((now - date) / 1000));
  if (age > 0) response.age = String(age);
}

/** Names lower-cased; each lifetime once (its first occurrence) and as whole seconds (see readAsTheRfcSays). */
function directivesAsTheRfcSays(list: string): string {
  const out: string[] = [];
  let maxAge = false;
  let sMaxage = false;
  for (const part of list.split(',')) {
    const eq = part.indexOf('=');
    const name = (eq === -1 ? part : part.slice(0, eq)).trim().toLowerCase();
    if (name === '') continue;
    if (name === 'max-age' || name === 's-maxage') {
      if (name === 'max-age' ? maxAge : sMaxage) continue;
      if (name === 'max-age') maxAge = true;
      else sMaxage = true;
      out.push(`${name}=${deltaSeconds(part, eq)}`);
    } else {
      out.push(eq === -1 ? name : `${name}=${part.slice(eq + 1).trim()}`);
    }
  }
  return out.join(', ');
}

/** A lifetime directive's value (`part` is the directive, `eq` where its "=" is): delta-seconds, or 0 when invalid. */
function deltaSeconds(part: string, eq: number): number {
  // The grammar has no whitespace around "=" (RFC 9111 5.2): `max-age = 60` is not a max-age of 60.
  if (eq === -1 || isSpace(part.charCodeAt(eq - 1)) || isSpace(part.charCodeAt(eq + 1))) return 0;
  let value = part.slice(eq + 1).trimEnd();
  if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
  return /^\d+$/.test(value) ? Math.min(Number(value), MAX_DELTA_SECONDS) : 0;
}

function isSpace(code: number): boolean {
  return code === 0x20 || code === 0x09;
}

function lower(value: CachePolicy.Headers[string]): string {
  return typeof value === 'string' ? value.toLowerCase() : '';
}

/** RFC 9111 4.2.2: 10% of the time between Last-Modified and Date (or now), at most `maxMs`. */
function heuristicLifetimeMs(response: CachePolicy.Headers, now: number, maxMs: number): number {
  if (typeof response['last-modified'] !== 'string') return 0;
  const modified = Date.parse(response['last-modified']);
  const date = typeof response.date === 'string' ? Date.parse(response.date) : now;
  if (!(date > modified)) return 0;
  return Math.min(maxMs, (date - modified) / 10);
}

function addLifetime(response: CachePolicy.Headers, seconds: number): void {
  const lifetime = `s-maxage=${seconds}`;
  const list = response['cache-control'];
  response['cache-control'] = typeof list === 'string' ? `${list}, ${lifetime}` : lifetime;
}

function hasExplicitLifetime(response: CachePolicy.Headers): boolean {
  if (response.expires !== undefined) return true;
  const list = typeof response['cache-control'] === 'string' ? response['cache-control'].toLowerCase() : '';
  return hasDirective(list, 'max-age') || hasDirective(list, 's-maxage');
}

/** Statuses whose caching rules this cache implements: `must-understand` lifts `no-store` for them only. */
const UNDERSTOOD_STATUSES = new Set([200, 203, 204, 300, 301, 302, 303, 307, 308, 404, 405, 410, 414, 501]);

/**
 * `must-understand` (RFC 9111 5.2.2.3): for a status this cache understands, `no-store` is ignored
 * (removed from the view); for any other the answer is not stored (false). Null: no must-understand.
 */
function mustUnderstand(response: CachePolicy.Headers, status: number): boolean | null {
  const list = response['cache-control'];
  if (typeof list !== 'string' || !hasDirective(list.toLowerCase(), 'must-understand')) return null;
  if (!UNDERSTOOD_STATUSES.has(status)) return false;
  response['cache-control'] = list
    .split(',')
    .filter((part) => part.trim().toLowerCase() !== 'no-store')
    .join(',');
  return true;
}

function withoutRevalidation(cacheControl: string): string {
  const lower = cacheControl.toLowerCase();
  if (!lower.includes('revalidate')) return cacheControl;
  return cacheControl
    .split(',')
    .filter((part) => {
      const token = part.trim().toLowerCase();
      return token !== 'must-revalidate' && token !== 'proxy-revalidate';
    })
    .join(',')
    .trim();
}
