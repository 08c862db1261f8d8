/**
 * Virtual hosts (`upstreams[].hosts`): a request routes among the endpoints of the upstreams serving
 * its Host, plus the upstreams that list no hosts, in the usual specificity order (which upstreams
 * serve a host: ./host-sets.ts). Each distinct set of upstreams gets a routing table of its own,
 * compiled from the full table's routes; its routes keep the full table's ids, so balancers, breakers,
 * middleware and metrics keyed by id are shared. Its routes also carry the set's label (hostSet), by
 * which what must not be shared between the sets (cache entries, rate-limit buckets) is kept apart.
 */
import { createHash } from 'node:crypto';
import { RoutingTable } from '../routing/table.js';
import type { RouteEntry } from '../routing/types.js';
import { HostSets, type HostedUpstream } from './host-sets.js';

export type { HostedUpstream } from './host-sets.js';

export class HostRoutes {
  private constructor(private readonly sets: HostSets<RoutingTable>) {}

  /** null when no upstream lists hosts: every request uses the full table. */
  static build(full: RoutingTable, upstreams: readonly HostedUpstream[]): HostRoutes | null {
    let entries: RouteEntry[] | null = null;
    const ids = new Map(full.routes().map((route) => [`${route.method} ${route.canonical}`, route.id]));
    const idOf = (method: string, canonical: string): number => ids.get(`${method} ${canonical}`)!;
    const sets = HostSets.build(upstreams, ({ key, upstreams: serving }) => {
      entries ??= entriesOf(full);
      const members = new Set(serving);
      return RoutingTable.compile(entries.filter((e) => members.has(e.upstream)), { idOf, hostSet: hostSetLabel(key) }).table;
    });
    return sets === null ? null : new HostRoutes(sets);
  }

  /** The table for a Host header's value; null when no upstream serves that host. */
  tableFor(host: string | undefined): RoutingTable | null {
    return this.sets.match(host);
  }

  /** The table for a Host that names none of the upstreams' hosts; null when every upstream lists hosts. */
  tableForUnlistedHost(): RoutingTable | null {
    return this.sets.unlisted();
  }
}

/**
 * A set's label: short and printable, as it goes into cache keys and bucket names, and the same in
 * every worker and every instance with the same upstreams (a Redis store is shared between them).
 * 72 bits of the set's key, the members' sorted serviceLocations.
 */
export function hostSetLabel(key: string): string {
  return createHash('sha256').update(key).digest('base64url').slice(0, 12);
}

/** The entries a table was compiled from, in an order that keeps each route's targets in theirs. */
function entriesOf(table: RoutingTable): RouteEntry[] {
  const entries: RouteEntry[] = [];
  for (const route of table.routes()) {
    for (const target of route.targets) {
      entries.push({
        method: route.method,
        template: target.template,
        upstream: target.upstream,
        consumes: target.consumes,
        produces: target.produces,
        disabledMiddleware: target.disabledMiddleware,
        disabledListeners: target.disabledListeners,
      });
    }
  }
  return entries;
}
