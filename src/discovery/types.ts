import type { UpstreamConfig } from '../config/types.js';
import type { RouteEntry } from '../routing/types.js';

export interface DiscoveryOptions {
  /** Timeout of one doc fetch: connect, headers and body. */
  fetchTimeoutMs: number;
  /** Attempts after the first. */
  retries: number;
  /** Delay before the first retry; doubles per retry. */
  backoffMs: number;
  signal?: AbortSignal;
  /**
   * What the last discovery of this upstream found (re-discovery): a doc that comes back unchanged
   * (304 to its ETag, or the same bytes) is not parsed again, and this is what the discovery returns.
   */
  previous?: DiscoveredUpstream;
}

/**
 * One objection to an upstream's doc, or one endpoint the router left out, said of the endpoint it
 * concerns. `path` is the template as routed (base path folded in); `method` is null for a path item as
 * a whole (one with no operation to name), and both are null for the doc as a whole.
 */
export interface EndpointProblem {
  method: string | null;
  path: string | null;
  reason: string;
  /** A `static` upstream's: where in the upstream's config (`endpoints/3/path`). */
  pointer?: string;
}

export interface DiscoveredUpstream {
  upstream: UpstreamConfig;
  entries: RouteEntry[];
  /** The doc as fetched (parsed, not dereferenced), for /spec; null for `static` upstreams. */
  doc: object | null;
  /** What the validator objects to in the doc, per endpoint; the endpoints are routed all the same. */
  problems?: EndpointProblem[];
  /** Which doc text this was read from (fetched docs only). */
  version?: { sha256: string; etag?: string };
}
