/**
 * Virtual hosts (`upstreams[].hosts`): a request routes among the endpoints of the upstreams serving
 * its Host, plus the upstreams that list no hosts, in the usual specificity order. Each distinct set
 * of upstreams gets a routing table of its own, compiled from the full table's routes; its routes keep
 * the full table's ids, so balancers, breakers, middleware and metrics keyed by id are shared.
 *
 * Which set a host gets is decided by its exact name if an upstream lists it, else by the longest
 * wildcard that matches it: every shorter wildcard matching it also matches that wildcard's names, so
 * the set of a representative name below the longest wildcard is the host's set.
 */
import { RoutingTable } from '../routing/table.js';
import type { RouteEntry } from '../routing/types.js';
import { hostName, NameMatcher } from './server-names.js';

export interface HostedUpstream {
  serviceLocation: string;
  hosts?: readonly string[];
}

/** A label no DNS name has: the representative of a wildcard's names that no exact name is. */
const ANY_LABEL = '\u0000';

export class HostRoutes {
  private readonly matcher: NameMatcher<RoutingTable>;
  /** The table of a host no upstream lists (host-less upstreams only); null when there are none. */
  private readonly fallback: RoutingTable | null;

  private constructor(matcher: NameMatcher<RoutingTable>, fallback: RoutingTable | null) {
    this.matcher = matcher;
    this.fallback = fallback;
  }

  /** null when no upstream lists hosts: every request uses the full table. */
  static build(full: RoutingTable, upstreams: readonly HostedUpstream[]): HostRoutes | null {
    const patterns: Array<{ pattern: string; upstream: string }> = [];
    const hostless = new Set<string>();
    for (const upstream of upstreams) {
      if (upstream.hosts === undefined || upstream.hosts.length === 0) hostless.add(upstream.serviceLocation);
      else for (const pattern of upstream.hosts) patterns.push({ pattern: pattern.toLowerCase(), upstream: upstream.serviceLocation });
    }
    if (patterns.length === 0) return null;

    const entries = entriesOf(full);
    const ids = new Map(full.routes().map((route) => [`${route.method} ${route.canonical}`, route.id]));
    const idOf = (method: string, canonical: string): number => ids.get(`${method} ${canonical}`)!;
    const tables = new Map<string, RoutingTable>();
    const tableFor = (serving: Set<string>): RoutingTable | null => {
      if (serving.size === 0) return null;
      const key = [...serving].sort().join('\n');
      let table = tables.get(key);
      if (table === undefined) {
        table = RoutingTable.compile(entries.filter((e) => serving.has(e.upstream)), idOf).table;
        tables.set(key, table);
      }
      return table;
    };
    const servingOf = (name: string): Set<string> => {
      const serving = new Set(hostless);
      for (const { pattern, upstream } of patterns) if (matches(pattern, name)) serving.add(upstream);
      return serving;
    };
    const matcher = new NameMatcher<RoutingTable>();
    const seen = new Set<string>();
    for (const { pattern } of patterns) {
      if (seen.has(pattern)) continue;
      seen.add(pattern);
      const representative = pattern.startsWith('*.') ? ANY_LABEL + pattern.slice(1) : pattern;
      const table = tableFor(servingOf(representative));
      if (table !== null) matcher.add(pattern, table);
    }
    return new HostRoutes(matcher, tableFor(hostless));
  }

  /** The table for a Host header's value; null when no upstream serves that host. */
  tableFor(host: string | undefined): RoutingTable | null {
    return this.matcher.match(hostName(host)) ?? this.fallback;
  }
}

/** `*.` stands for one or more labels. */
export function matches(pattern: string, name: string): boolean {
  if (!pattern.startsWith('*.')) return pattern === name;
  const suffix = pattern.slice(1);
  return name.length > suffix.length && name.endsWith(suffix);
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
