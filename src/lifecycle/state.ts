/**
 * What the control surface (src/lifecycle/control.ts) swaps and the request lifecycle reads: the
 * routing table, the middleware, the listeners, whether the worker is closing. One per data plane;
 * nothing about any single request is kept here.
 */
import type { GatewayConfig } from '../config/types.js';
import type { RequestListener } from '../exchange/listener.js';
import { Pipeline } from '../middleware/pipeline.js';
import type { RoutingTable } from '../routing/table.js';
import { HostRoutes, type HostedUpstream } from '../edge/host-routes.js';

const EMPTY_PIPELINE = new Pipeline([], { add: () => {} });

export class DataPlaneState {
  readonly via: string;
  readonly viaBytes: Buffer;
  table: RoutingTable | null = null;
  /** Per-host tables when upstreams list `hosts` (src/edge/host-routes.ts); null: the table serves every host. */
  hostRoutes: HostRoutes | null = null;
  /** The upstreams with their `hosts`, as the last applied config has them. */
  hostedUpstreams: readonly HostedUpstream[];
  pipeline: Pipeline = EMPTY_PIPELINE;
  /** Every listener, told when a request is over (the done phase). */
  listeners: readonly RequestListener[] = [];
  /** Those of them that may want a capture (they have sample()). */
  samplers: readonly RequestListener[] = [];
  closing = false;
  /** Configured upstreams not discovered yet (their endpoints are missing from the table). */
  undiscovered = 0;
  /** Requests held or forwarded and not over yet (local replies inside the handler never count). */
  inFlight = 0;
  onDrained: (() => void) | null = null;
  /** performance.now() when the last request arrived (its head was read). */
  lastRequestAt = -Infinity;

  constructor(readonly config: GatewayConfig) {
    this.via = `1.1 ${config.name}`;
    this.viaBytes = Buffer.from(this.via, 'latin1');
    this.hostedUpstreams = config.upstreams;
  }

  setListeners(listeners: readonly RequestListener[]): void {
    this.listeners = listeners;
    this.samplers = listeners.filter((l) => l.sample !== undefined);
  }
}
