// Test support: a listener that keeps a snapshot of every finished request, in the fields tests assert.
import type { RequestContext } from '../../src/exchange/context.js';
import type { RequestListener } from '../../src/exchange/listener.js';

export interface FinishedInfo {
  method: string;
  path: string;
  routeTemplate: string | null;
  routeId: number;
  upstream: string | null;
  status: number;
  /** Epoch milliseconds. */
  startedAt: number;
  latencyMs: number;
  bytesIn: number;
  bytesOut: number;
  clientAddress: string;
  disabledListeners: readonly string[];
}

export function snapshot(ctx: RequestContext): FinishedInfo {
  return {
    method: ctx.method,
    path: ctx.path,
    routeTemplate: ctx.routeTemplate,
    routeId: ctx.routeId,
    upstream: ctx.upstream,
    status: ctx.status,
    startedAt: performance.timeOrigin + ctx.startedAt,
    latencyMs: ctx.latencyMs,
    bytesIn: ctx.bytesIn,
    bytesOut: ctx.bytesOut,
    clientAddress: ctx.clientAddress,
    disabledListeners: ctx.disabledListeners,
  };
}

/** A listener (not disabled by any endpoint) that pushes each finished request's snapshot into `into`. */
export function recordInto(into: FinishedInfo[]): RequestListener {
  return { id: 'test-recorder', always: true, done: (ctx) => void into.push(snapshot(ctx)) };
}
