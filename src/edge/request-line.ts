/** The request line's own limit (like nginx's large_client_header_buffers): a target longer than limits.maxUrlBytes is 414. */
export const DEFAULT_MAX_URL_BYTES = 8192;

/** `url` is the path as received, `query` the raw query without "?" (both ASCII once accepted). */
export function targetTooLong(url: string, query: string, max = DEFAULT_MAX_URL_BYTES): boolean {
  return url.length + (query.length === 0 ? 0 : query.length + 1) > max;
}
