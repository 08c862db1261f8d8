// API STUB — being implemented with the routing engine.
/**
 * Normalize a raw request path (no query): RFC 3986 dot-segment removal, percent-encoded unreserved
 * characters decoded, `%2F` kept encoded, one trailing slash removed unless the path is "/".
 * Returns null when the request must be refused with 400 (invalid percent-encoding, `..` above root,
 * not starting with "/").
 */
export function normalizePath(raw: string): string | null {
  return raw;
}
