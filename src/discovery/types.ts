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
}

export interface DiscoveredUpstream {
  upstream: UpstreamConfig;
  entries: RouteEntry[];
  /** The validated, original (non-dereferenced) doc, for /spec; null for `static` upstreams. */
  doc: object | null;
}
