/**
 * Whether an upstream answer may be stored, by RFC 9111 shared-cache rules as http-cache-semantics
 * implements them, plus the stricter ones of docs/reference/response-cache.md#what-is-stored:
 *
 * - never with Set-Cookie (the library allows it with `public`), never with `Vary: *` in any position;
 * - only an explicit lifetime counts (max-age, s-maxage, Expires): no heuristic from Last-Modified,
 *   no implicit day for `immutable`; `defaultTtlMs` > 0 gives a 200 without one that lifetime
 *   (rounded up to whole seconds, HTTP's unit);
 * - a request with Authorization only when the answer is `public` or has `s-maxage`.
 *
 * The library treats must-revalidate as "never reuse without revalidating", even while fresh; RFC
 * 9111 5.2.2.2 only forbids reusing it once stale. This cache never revalidates, so the policy is
 * made from a view of the headers without must-revalidate / proxy-revalidate (which also keeps them
 * from allowing an authenticated answer to be stored), and StoredResponse.mustRevalidate keeps such an
 * entry from ever being served stale.
 */
import CachePolicy from 'http-cache-semantics';
import { comparedValue, varyNames } from './key.js';
import { hasDirective } from './record.js';

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
export function judge(url: string, requestHeaders: readonly string[], status: number, headers: readonly string[], defaultTtlMs: number): Verdict {
  const response: CachePolicy.Headers = {};
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    if (name === 'set-cookie') return FORBIDDEN;
    const previous = response[name];
    response[name] = previous === undefined ? headers[i + 1] : `${previous as string}, ${headers[i + 1]}`;
  }
  let vary: readonly string[] = [];
  if (typeof response.vary === 'string') {
    const names = varyNames(response.vary);
    if (names === '*') return FORBIDDEN;
    vary = names;
  }
  const cacheControl = typeof response['cache-control'] === 'string' ? response['cache-control'] : undefined;
  if (cacheControl !== undefined) {
    const view = withoutRevalidation(cacheControl);
    if (view === '') delete response['cache-control'];
    else response['cache-control'] = view;
  }
  const request = policyRequest(url, requestHeaders, vary);
  let policy = new CachePolicy(request, { status, headers: response }, POLICY_OPTIONS);
  if (!policy.storable()) return FORBIDDEN;
  if (defaultTtlMs > 0 && status === 200 && !hasExplicitLifetime(response)) {
    const lifetime = `s-maxage=${Math.ceil(defaultTtlMs / 1000)}`;
    const list = response['cache-control'];
    response['cache-control'] = typeof list === 'string' ? `${list}, ${lifetime}` : lifetime;
    policy = new CachePolicy(request, { status, headers: response }, POLICY_OPTIONS);
  }
  const fresh = policy.maxAge() - policy.age() > 0;
  return { storable: true, policy: fresh ? policy : null, vary };
}

/**
 * The request as the policy sees it: the headers its rules and Vary read (credentials as digests),
 * never the whole request (a remote store would keep it).
 */
export function policyRequest(url: string, headers: readonly string[], vary: readonly string[]): CachePolicy.Request {
  const view: CachePolicy.Headers = {};
  for (const name of ['cache-control', 'pragma', 'authorization']) {
    const value = comparedValue(headers, name);
    if (value !== undefined) view[name] = value;
  }
  for (const name of vary) {
    const value = comparedValue(headers, name);
    if (value !== undefined) view[name] = value;
  }
  return { method: 'GET', url, headers: view };
}

function hasExplicitLifetime(response: CachePolicy.Headers): boolean {
  if (response.expires !== undefined) return true;
  const list = typeof response['cache-control'] === 'string' ? response['cache-control'].toLowerCase() : '';
  return hasDirective(list, 'max-age') || hasDirective(list, 's-maxage');
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
