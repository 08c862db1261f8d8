import type { GatewayConfig } from '../config/types.js';
import type { HeaderView } from '../http/request-head.js';
import type { LoadedUws } from '../native/uws.js';
import type { RoutingTable } from '../routing/table.js';
import type { Counters } from '../metrics/counters.js';
import type { CircuitReport } from './breaker.js';
import type { Pipeline } from '../middleware/pipeline.js';
import type { RequestListener } from '../listeners/capture.js';
import type { RequestObserve } from '../observe/request-observe.js';

export type { HeaderView } from '../http/request-head.js';

/** A built-in endpoint's answer (written as is; HEAD gets its headers and Content-Length only). */
export interface BuiltinAnswer {
  status: number;
  headers: Readonly<Record<string, string>>;
  body: Uint8Array | string;
}

/**
 * Consulted first for every request that passed the limits and path normalization, with the
 * normalized path and the raw query. `headers` is a reused object holding only accept,
 * accept-encoding, content-type, host, if-none-match, authorization and user-agent; valid during the
 * call only. Return null to route the request normally.
 */
export type BuiltinsHook = (method: string, path: string, query: string, headers: HeaderView) => BuiltinAnswer | null;

/**
 * One finished request. The data plane reuses ONE object for every call: read what you need during
 * the call and do not keep a reference to it.
 */
export interface RequestDoneInfo {
  method: string;
  /** The normalized path (the raw URL path when it could not be normalized). */
  path: string;
  /** The selected endpoint's template; null when no endpoint was selected. */
  routeTemplate: string | null;
  routeId: number;
  /** The upstream (serviceLocation) the request went to; null when it was not forwarded. */
  upstream: string | null;
  /** Status sent to the client; 499 when the client went away before any response was sent. */
  status: number;
  /** Wall-clock arrival time, epoch milliseconds (fractional). */
  startedAt: number;
  /** From arrival until the response was handed to uWS complete (or the connection ended). */
  latencyMs: number;
  /** Request body bytes received. */
  bytesIn: number;
  /** Response body bytes sent (not counting the head). */
  bytesOut: number;
  /** The peer, or per trustedProxies the client a trusted proxy forwarded for (src/http/trusted-proxies.ts). */
  clientAddress: string;
  /** The endpoint's x-disabled-listeners; empty when no endpoint was selected. */
  disabledListeners: readonly string[];
  /** The raw query string (without "?"); '' when none. */
  query: string;
  /** The request ID ('' when request IDs are off). */
  requestId: string;
  /** The W3C trace id the request belongs to. */
  traceId: string;
  userAgent: string | undefined;
  /** Who apiKeyAuth admitted; null when no key was checked. */
  consumer: string | null;
  /** From sending the request upstream until the upstream's answer ended (or failed); -1 when not forwarded. */
  upstreamMs: number;
  /** The answer's X-Cache (HIT, MISS, STALE, BYPASS); null when the response cache did not run. */
  cache: string | null;
}

export interface UpstreamWeight {
  serviceLocation: string;
  weight: number;
}

export interface DataPlaneOptions {
  /** host, port, name, trustedProxies, encodedSlashes, timeouts, limits, circuitBreaker, upstreamWeighting, upstreamPool and upstreams (with their tls) are read. */
  config: GatewayConfig;
  builtins?: BuiltinsHook | null;
  onRequestDone?: ((info: RequestDoneInfo) => void) | null;
  /** A breaker changed (see breakerReport); the worker tells the primary. */
  onBreakersChanged?: (() => void) | null;
  /** Where retries (and other events) are counted for /metrics. */
  counters?: Counters | null;
  /** The native build to use; loadUws() by default. */
  uws?: LoadedUws;
  /** Request IDs, trace context and span export (src/observe/); none when unset. */
  observe?: RequestObserve | null;
}

export interface DataPlane {
  /** The port actually bound (useful with port 0). */
  readonly port: number;
  /** The native build serving. */
  readonly uws: LoadedUws;
  /** Swaps the middleware; requests already past it finish as they were decided. */
  setPipeline(pipeline: Pipeline): void;
  /** Listeners that sample requests for a capture of them and their answers (alternateUpstream). */
  setListeners(listeners: readonly RequestListener[]): void;
  /** Swaps the routing table; requests already forwarded finish on the old one. */
  setTable(table: RoutingTable): void;
  /**
   * Configured weights; hosts not listed drop to weight 0 at once and their pools close when idle.
   * With `config` (a reload's), its upstreams' TLS settings are taken too: a host whose settings
   * changed gets a new connection pool, the old one finishes its requests and closes.
   */
  setUpstreams(upstreams: readonly UpstreamWeight[], config?: GatewayConfig): void;
  /** Stops accepting, waits for in-flight requests up to timeouts.shutdownGraceMs, then closes every connection. */
  close(): Promise<void>;
  /** Requests being answered right now (built-ins and errors are answered synchronously and never count). */
  inFlight(): number;
  /** Every circuit breaker this worker tracks, endpoints named "METHOD template". */
  breakerReport(): CircuitReport[];
  /** Opens a breaker the primary found tripped across workers (no-op when it is already open). */
  tripBreaker(upstream: string, endpoint: string | null): void;
}
