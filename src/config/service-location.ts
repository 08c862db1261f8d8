const SHAPE_HINT = 'give only scheme://host:port';

/**
 * Checks an upstream's serviceLocation and returns its origin (lower-case host, default port dropped),
 * which is the upstream's key. A lone trailing "/" is accepted: it is how URLs are usually copied.
 */
export function normalizeServiceLocation(raw: string): { origin: string } | { reason: string } {
  const quoted = JSON.stringify(redactPassword(raw));
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { reason: `${quoted} is not a URL; ${SHAPE_HINT}, e.g. "http://10.0.0.7:8080"` };
  }
  if (raw.trim() !== raw) return { reason: `${quoted} has spaces around it` };
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return { reason: `${quoted} must use http:// or https://` };
  }
  if (url.username !== '' || url.password !== '') {
    return { reason: `${quoted} has user info; ${SHAPE_HINT} (credentials do not belong in serviceLocation)` };
  }
  if (url.pathname !== '/' || /^[a-z]+:\/\/[^/]*\/\//i.test(raw)) return { reason: `${quoted} has a path; ${SHAPE_HINT}` };
  if (url.search !== '' || raw.includes('?')) return { reason: `${quoted} has a query; ${SHAPE_HINT}` };
  if (url.hash !== '' || raw.includes('#')) return { reason: `${quoted} has a fragment; ${SHAPE_HINT}` };
  if (url.port === '0') return { reason: `${quoted} has port 0, which nothing listens on` };
  return { origin: url.origin };
}

/**
 * Never echo credentials into logs: the whole user info goes, user name included (a token is often
 * the user name: `https://ghp_...:x-oauth-basic@host`).
 */
function redactPassword(raw: string): string {
  return raw.replace(/^([a-z][a-z0-9+.-]*:\/\/)[^/@]*@/i, '$1***@');
}
