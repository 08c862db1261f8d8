import type { GatewayConfig } from '../config/types.js';
import type { LoadedUws } from '../native/uws.js';
import type { RoutingTable } from '../routing/table.js';
import type { Counters } from '../metrics/counters.js';
import type { CircuitReport } from './upstream-breakers.js';
import type { Pipeline } from '../middleware/pipeline.js';
import type { BuiltinsHook } from '../exchange/builtins.js';
import type { RequestObserve } from '../observe/request-observe.js';
import type { RequestListener } from '../exchange/listener.js';
import type { UpstreamWeight } from '../lifecycle/forward.js';
import type { Warn } from './upstream-tls-failures.js';

export type { UpstreamWeight } from '../lifecycle/forward.js';

export interface DataPlaneOptions {
  /** host, port, name, trustedProxies, encodedSlashes, timeouts, limits, circuitBreaker, upstreamWeighting, upstreamPool and upstreams (with their tls) are read. */
  config: GatewayConfig;
  builtins?: BuiltinsHook | null;
  /** Told of every finished request from the start (setListeners replaces them). */
  listeners?: readonly RequestListener[];
  /** A breaker changed (see breakerReport); the worker tells the primary. */
  onBreakersChanged?: (() => void) | null;
  /** Where retries (and other events) are counted for /metrics. */
  counters?: Counters | null;
  /** Request IDs, trace context and span export (src/observe/); null: none. */
  observe?: RequestObserve | null;
  /** Where what an operator should see is logged at warn (an upstream's TLS handshake failure and why); null: nowhere. */
  warn?: Warn | null;
  /** The native build to use; loadUws() by default. */
  uws?: LoadedUws;
}

export interface DataPlane {
  /** The port actually bound (useful with port 0). */
  readonly port: number;
  /** The TLS listener's port; 0 without `tls`. */
  readonly tlsPort: number;
  /**
   * A config's edge settings (src/edge/): TLS certificates (new handshakes get them, open connections
   * keep theirs) and the upstreams' hosts, which the next setTable uses.
   */
  applyEdge(config: GatewayConfig): void;
  /** The native build serving. */
  readonly uws: LoadedUws;
  /** Swaps the middleware; requests already past it finish as they were decided. */
  setPipeline(pipeline: Pipeline): void;
  /** Every listener told of finished requests: metrics, access log, configured ones (those with sample() get captures). */
  setListeners(listeners: readonly RequestListener[]): void;
  /** How many configured upstreams are not discovered yet (a 404 says so). */
  setUndiscoveredUpstreams(count: number): void;
  /** Swaps the routing table; requests already forwarded finish on the old one. */
  setTable(table: RoutingTable): void;
  /**
   * Configured weights; hosts not listed drop to weight 0 at once and their pools close when idle.
   * With `config` (a reload's), its upstreams' TLS settings are taken too: a host whose settings
   * changed gets a new connection pool, the old one finishes its requests and closes.
   */
  setUpstreams(upstreams: readonly UpstreamWeight[], config?: GatewayConfig): void;
  /**
   * Stops accepting, waits for in-flight requests up to `graceMs` (default: timeouts.shutdownGraceMs of
   * the config it was made with), then closes every connection.
   */
  close(graceMs?: number): Promise<void>;
  /** Requests being answered right now (built-ins and errors are answered synchronously and never count). */
  inFlight(): number;
  /** Every circuit breaker this worker tracks, endpoints named "METHOD template". */
  breakerReport(): CircuitReport[];
  /** Opens a breaker the primary found tripped across workers (no-op when it is already open). */
  tripBreaker(upstream: string, endpoint: string | null): void;
}

/** A data plane created without listening (createDataPlane): listen() binds its ports. */
export interface UnboundDataPlane extends DataPlane {
  /** Binds the configured ports; rejects (the upstream client closed) when they cannot be bound. */
  listen(): Promise<void>;
}
