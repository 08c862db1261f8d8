const ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/**
 * The Allow header for a path: the declared methods of every template matching it, plus HEAD when GET
 * is there (HEAD is served by GET) and OPTIONS (always answered). Well-known methods first.
 */
export function formatAllow(declared: Iterable<string>): string {
  const methods = new Set(declared);
  if (methods.size === 0) return '';
  if (methods.has('GET')) methods.add('HEAD');
  methods.add('OPTIONS');
  const known = ORDER.filter((m) => methods.has(m));
  const others = [...methods].filter((m) => !ORDER.includes(m)).sort();
  return known.concat(others).join(', ');
}
