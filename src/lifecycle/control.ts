/**
 * The data plane's control surface: what the worker swaps (table, upstreams, middleware, listeners),
 * asks (in-flight count, breakers) and ends (close). A separate object from the request lifecycle,
 * which reads what this one sets through the shared DataPlaneState.
 */
import { performance } from 'node:perf_hooks';
import type { GatewayConfig } from '../config/types.js';
import type { RequestListener } from '../exchange/listener.js';
import type { Pipeline } from '../middleware/pipeline.js';
import type { FetchUpstream } from '../middleware/types.js';
import type { CircuitReport } from '../proxy/upstream-breakers.js';
import type { DataPlane, UnboundDataPlane } from '../proxy/data-plane-types.js';
import type { RoutingTable } from '../routing/table.js';
import { HostRoutes } from '../edge/host-routes.js';
import type { UpstreamWeight } from './forward.js';
import type { RequestLifecycle } from './request-lifecycle.js';
import type { DataPlaneState } from './state.js';
import { fetchThrough } from './upstream-fetch.js';

/** How long a closing data plane waits for requests on kept-alive connections before closing them (see quiet). */
const QUIET_MS = 500;

/** The transport's listening side, as the control surface drives it. */
export interface Acceptor {
  /** Binds the configured ports. */
  listen(): Promise<void>;
  readonly port: number;
  /** The TLS listener's port; 0 without `tls`. */
  readonly tlsPort: number;
  /** New TLS handshakes get the config's certificates; open connections keep theirs. */
  setCertificates(config: GatewayConfig): void;
  /** No new connections; open ones go on. */
  stopListening(): void;
  /** Closes idle keep-alive connections and whatever is still open. */
  closeConnections(): void;
  /** Refuses new WebSocket upgrades; closes open WebSocket connections with 1001 after the grace. */
  shutDownWebSockets(graceMs: number): Promise<void>;
}

export class DataPlaneControl implements UnboundDataPlane {
  private closed: Promise<void> | null = null;
  /** What a pipeline's middleware fetch from upstreams with, outside client requests. */
  private readonly fetchUpstream: FetchUpstream;

  constructor(
    readonly uws: DataPlane['uws'],
    private readonly state: DataPlaneState,
    private readonly lifecycle: RequestLifecycle,
    private readonly acceptor: Acceptor,
  ) {
    this.fetchUpstream = fetchThrough(lifecycle.forwarder);
  }

  /**
   * Binds the configured ports: the kernel hands this data plane connections from then on, so the
   * state it is to serve with (table, upstreams, edge settings, middleware) is set first. If binding
   * fails the upstream client is closed and the error thrown.
   */
  async listen(): Promise<void> {
    try {
      await this.acceptor.listen();
    } catch (err) {
      await this.lifecycle.forwarder.close(0);
      throw err;
    }
  }

  get port(): number {
    return this.acceptor.port;
  }

  get tlsPort(): number {
    return this.acceptor.tlsPort;
  }

  /**
   * A config's edge settings: TLS certificates (new handshakes get them), Strict-Transport-Security
   * (answers from now on) and the upstreams' hosts, which the next setTable uses.
   */
  applyEdge(config: GatewayConfig): void {
    this.acceptor.setCertificates(config);
    this.lifecycle.accept.setHsts(config);
    this.state.hostedUpstreams = config.upstreams;
  }

  setTable(table: RoutingTable): void {
    this.state.table = table;
    this.state.hostRoutes = HostRoutes.build(table, this.state.hostedUpstreams);
    this.lifecycle.forwarder.setTable(table);
  }

  setUndiscoveredUpstreams(count: number): void {
    this.state.undiscovered = count;
  }

  setPipeline(pipeline: Pipeline): void {
    pipeline.useUpstream(this.fetchUpstream);
    this.state.pipeline = pipeline;
  }

  setListeners(listeners: readonly RequestListener[]): void {
    this.state.setListeners(listeners);
  }

  setUpstreams(upstreams: readonly UpstreamWeight[], config?: GatewayConfig): void {
    this.lifecycle.forwarder.setUpstreams(upstreams, config);
  }

  inFlight(): number {
    return this.state.inFlight;
  }

  breakerReport(): CircuitReport[] {
    const routes = this.state.table?.routes() ?? [];
    return this.lifecycle.forwarder.breakers.report((routeId) => {
      const route = routes[routeId];
      return route === undefined ? null : `${route.method} ${route.template}`;
    });
  }

  tripBreaker(upstream: string, endpoint: string | null): void {
    const breakers = this.lifecycle.forwarder.breakers;
    if (endpoint === null) return breakers.trip(upstream, null);
    const route = this.state.table?.routes().find((r) => `${r.method} ${r.template}` === endpoint);
    if (route !== undefined) breakers.trip(upstream, route.id);
  }

  /** `graceMs`: the worker's current timeouts.shutdownGraceMs (a reload may have changed it since this data plane was made). */
  close(graceMs = this.state.config.timeouts.shutdownGraceMs): Promise<void> {
    this.closed ??= this.shutDown(graceMs);
    return this.closed;
  }

  private async shutDown(graceMs: number): Promise<void> {
    const state = this.state;
    const deadline = performance.now() + graceMs;
    state.closing = true;
    this.acceptor.stopListening();
    const webSocketsClosed = this.acceptor.shutDownWebSockets(graceMs);
    await this.quiet(deadline);
    await webSocketsClosed;
    await this.quiet(deadline);
    this.acceptor.closeConnections();
    await this.lifecycle.forwarder.close(Math.min(graceMs, 1000));
  }

  /**
   * Resolves once nothing has been in flight, and no request has arrived, for QUIET_MS; or at
   * `deadline`. While closing, every answer says Connection: close and closes its connection, but a
   * kept-alive connection between two requests can only be closed from here, and a client often
   * sends its next request on another connection of its pool as soon as an answer reaches it.
   * Closing them the moment nothing was in flight cut the requests already on their way.
   */
  private async quiet(deadline: number): Promise<void> {
    const state = this.state;
    let busyUntil = state.lastRequestAt;
    for (;;) {
      if (state.inFlight > 0) {
        await this.drained(deadline);
        busyUntil = performance.now();
      }
      const now = performance.now();
      const quietFor = now - Math.max(busyUntil, state.lastRequestAt);
      if (now >= deadline || (state.inFlight === 0 && quietFor >= QUIET_MS)) return;
      if (state.inFlight === 0) await new Promise((resolve) => setTimeout(resolve, Math.min(QUIET_MS - quietFor, deadline - now)));
    }
  }

  /** Resolves when nothing is in flight, or at `deadline` (performance.now()). */
  private drained(deadline: number): Promise<void> {
    const state = this.state;
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, Math.max(0, deadline - performance.now()));
      function done(): void {
        clearTimeout(timer);
        state.onDrained = null;
        resolve();
      }
      state.onDrained = done;
    });
  }
}
