/**
 * The worker's HTTP data plane, composed: the shared state, the request lifecycle
 * (src/lifecycle/request-lifecycle.ts), the uWS accept adapter that feeds it, and the control surface
 * the worker drives.
 */
import { loadUws } from '../native/uws.js';
import { DataPlaneControl } from '../lifecycle/control.js';
import { RequestLifecycle } from '../lifecycle/request-lifecycle.js';
import { DataPlaneState } from '../lifecycle/state.js';
import { UwsAcceptor } from '../lifecycle/uws/uws-accept.js';
import type { DataPlane, DataPlaneOptions, UnboundDataPlane } from './data-plane-types.js';

export type { DataPlane, DataPlaneOptions, UnboundDataPlane, UpstreamWeight } from './data-plane-types.js';
export type { BuiltinAnswer } from '../exchange/answer.js';
export type { BuiltinsHook, HeaderView } from '../exchange/builtins.js';

/**
 * A data plane that does not listen yet: what it is to serve with is set on it first, then listen()
 * binds its ports (port and tlsPort are 0 until then). A cluster worker starts this way, so the kernel
 * hands it no connection before it can serve one. The TLS listener, created by listen(), takes the
 * certificates of `options.config`.
 */
export function createDataPlane(options: DataPlaneOptions): UnboundDataPlane {
  const { config } = options;
  const uws = options.uws ?? loadUws();
  const state = new DataPlaneState(config);
  const lifecycle = new RequestLifecycle(state, {
    builtins: options.builtins ?? null,
    counters: options.counters ?? null,
    onBreakersChanged: options.onBreakersChanged ?? null,
    observe: options.observe ?? null,
    warn: options.warn ?? null,
  });
  const acceptor = new UwsAcceptor(uws, state, lifecycle, options.counters ?? null);
  const control = new DataPlaneControl(uws, state, lifecycle, acceptor);
  if (options.listeners !== undefined) control.setListeners(options.listeners);
  return control;
}

/** A data plane listening on its configured ports. */
export async function startDataPlane(options: DataPlaneOptions): Promise<DataPlane> {
  const plane = createDataPlane(options);
  await plane.listen();
  return plane;
}
