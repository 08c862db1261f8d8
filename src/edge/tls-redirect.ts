/**
 * `plainPort: "redirect"`: where a request on the plain port is sent, `https://<host>[:tls.port]`
 * followed by its normalized path and query. Answered by the request lifecycle's route phase after the
 * built-ins (matched after path normalization, as on any port), so a redirect is counted, logged,
 * traced and carries a request ID like every other answer. The Host was checked by the accept phase
 * (a host and optional port: `evil.com/x` or `a@b` never reach here), since it becomes the Location's
 * authority.
 */

/** The https authority for a request whose Host is `host` (undefined: none sent): '' when there is no host to name. */
export function redirectAuthority(host: string | undefined, tlsPort: number): string {
  const name = host === undefined ? '' : hostWithoutPort(host);
  if (name === '') return '';
  return tlsPort === 443 ? name : `${name}:${tlsPort}`;
}

/** The host of a Host header without its port (IPv6 literals keep their brackets). */
function hostWithoutPort(host: string): string {
  if (host.startsWith('[')) {
    const close = host.indexOf(']');
    return close === -1 ? '' : host.slice(0, close + 1);
  }
  const colon = host.indexOf(':');
  return colon === -1 ? host : host.slice(0, colon);
}
