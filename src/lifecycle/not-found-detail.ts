/**
 * The detail of a 404. While some upstream is not discovered (pending, or failed), its endpoints are
 * missing from the table: the 404 says so, or it would read as a typo in the path. Upstreams are
 * counted, not named: their addresses are the operator's business (the health report names them).
 */
export function notFoundDetail(undiscovered: number): string {
  if (undiscovered === 0) return 'no endpoint matches this path';
  const some = undiscovered === 1 ? '1 upstream is' : `${undiscovered} upstreams are`;
  return `no endpoint matches this path, but ${some} not discovered yet (pending or failed), so ${undiscovered === 1 ? 'its' : 'their'} endpoints are not routed`;
}
