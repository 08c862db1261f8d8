/**
 * Which upstreams serve a Host (`upstreams[].hosts`): the upstreams listing a name or `*.` wildcard
 * that matches it, plus every upstream that lists no hosts. Routing (one table per set) and /spec?host=
 * (one document per set) both resolve hosts here, so they cannot disagree.
 *
 * A host's set is decided by its exact name if an upstream lists it, else by the longest wildcard that
 * matches it: every shorter wildcard matching it also matches that wildcard's names, so the set of a
 * representative name below the longest wildcard is the host's set.
 */
import { hostName, NameMatcher } from './server-names.js';

export interface HostedUpstream {
  serviceLocation: string;
  hosts?: readonly string[];
}

/** A set of upstreams serving some hosts: serviceLocations sorted, and their join as a key. */
export interface UpstreamSet {
  key: string;
  upstreams: readonly string[];
}

/** A label no DNS name has: the representative of a wildcard's names that no exact name is. */
const ANY_LABEL = '\u0000';

export class HostSets<T> {
  private constructor(
    private readonly matcher: NameMatcher<T>,
    /** The value of a host no upstream lists (host-less upstreams only); null when there are none. */
    private readonly fallback: T | null,
  ) {}

  /**
   * null when no upstream lists hosts (every host gets every upstream). `valueOf` is called once per
   * distinct set; a null value is a set no request routes to.
   */
  static build<T>(upstreams: readonly HostedUpstream[], valueOf: (set: UpstreamSet) => T | null): HostSets<T> | null {
    const patterns: Array<{ pattern: string; upstream: string }> = [];
    const hostless = new Set<string>();
    for (const upstream of upstreams) {
      if (upstream.hosts === undefined || upstream.hosts.length === 0) hostless.add(upstream.serviceLocation);
      else for (const pattern of upstream.hosts) patterns.push({ pattern: pattern.toLowerCase(), upstream: upstream.serviceLocation });
    }
    if (patterns.length === 0) return null;

    const values = new Map<string, T | null>();
    const valueFor = (serving: Set<string>): T | null => {
      if (serving.size === 0) return null;
      const sorted = [...serving].sort();
      const key = sorted.join('\n');
      if (!values.has(key)) values.set(key, valueOf({ key, upstreams: sorted }));
      return values.get(key)!;
    };
    const servingOf = (name: string): Set<string> => {
      const serving = new Set(hostless);
      for (const { pattern, upstream } of patterns) if (matches(pattern, name)) serving.add(upstream);
      return serving;
    };
    const matcher = new NameMatcher<T>();
    const seen = new Set<string>();
    for (const { pattern } of patterns) {
      if (seen.has(pattern)) continue;
      seen.add(pattern);
      const representative = pattern.startsWith('*.') ? ANY_LABEL + pattern.slice(1) : pattern;
      const value = valueFor(servingOf(representative));
      if (value !== null) matcher.add(pattern, value);
    }
    return new HostSets(matcher, valueFor(hostless));
  }

  /** Every distinct set a host can get, the host-less one included (when there are host-less upstreams). */
  static sets(upstreams: readonly HostedUpstream[]): UpstreamSet[] {
    const sets: UpstreamSet[] = [];
    HostSets.build(upstreams, (set) => {
      sets.push(set);
      return set;
    });
    return sets;
  }

  /** The value for a Host header's value; null when no upstream serves that host. */
  match(host: string | undefined): T | null {
    return this.matcher.match(hostName(host)) ?? this.fallback;
  }

  /** The value for a Host that no upstream lists: the upstreams without hosts; null when there are none. */
  unlisted(): T | null {
    return this.fallback;
  }
}

/**
 * `*.` stands for one or more labels. Only for the names build() sets up (an upstream's exact name,
 * or a wildcard's representative with ANY_LABEL); a Host goes through NameMatcher.match, which also
 * wants the labels a wildcard stands for to be DNS labels.
 */
function matches(pattern: string, name: string): boolean {
  if (!pattern.startsWith('*.')) return pattern === name;
  const suffix = pattern.slice(1);
  return name.length > suffix.length && name.endsWith(suffix);
}
