/**
 * The upstream and endpoint series a routing table can feed: what /metrics keeps when a new table is
 * published (primary, src/metrics/aggregate.ts) and swapped in (workers, src/metrics/recorder.ts). A
 * removed upstream's or endpoint's series are dropped, as Envoy drops a removed cluster's stats, so
 * that the label values stay bounded by the config and the documents in use.
 */
export interface RoutedSeries {
  /** Every target's serviceLocation. */
  readonly upstreams: ReadonlySet<string>;
  /** "METHOD template" of every route, and "HEAD template" of every GET route (a HEAD it serves). */
  readonly endpoints: ReadonlySet<string>;
}

/** One route: its method, template and the serviceLocations of its targets. */
export type RoutedEndpoint = readonly [method: string, template: string, upstreams: Iterable<string>];

/** Drops the series of `series` whose key is not in `routed` (one of RoutedSeries' sets). */
export function retainKeys(series: Map<string, unknown>, routed: ReadonlySet<string>): void {
  for (const key of series.keys()) if (!routed.has(key)) series.delete(key);
}

export function routedSeries(routes: Iterable<RoutedEndpoint>): RoutedSeries {
  const upstreams = new Set<string>();
  const endpoints = new Set<string>();
  for (const [method, template, targets] of routes) {
    endpoints.add(`${method} ${template}`);
    if (method === 'GET') endpoints.add(`HEAD ${template}`);
    for (const upstream of targets) upstreams.add(upstream);
  }
  return { upstreams, endpoints };
}
