/**
 * Done: the request is over. Listeners that sample requests get a capture at routing time (sample);
 * when the request is over every listener is told, in one loop (done): the metrics recorder, the
 * access log, the configured ones. An endpoint's x-disabled-listeners skips those it names; a listener
 * that samples is told only of the requests it sampled.
 */
// The module binding, not the global: globalThis.performance is an accessor, read on every call (about 12% of a now() call on Node 20).
import { performance } from 'node:perf_hooks';
import { Capture } from '../exchange/capture.js';
import type { RequestContext } from '../exchange/context.js';
import type { ConnectionSummary, RequestListener } from '../exchange/listener.js';
import type { AcceptPhase } from './accept.js';
import { reportBug } from './report-bug.js';
import type { DataPlaneState } from './state.js';
import type { RequestObserve } from '../observe/request-observe.js';
import { stripQueryParameters } from '../http/query-parameters.js';
import type { RouteTarget } from '../routing/types.js';

const NO_IDS: readonly string[] = Object.freeze([]);

/** Per endpoint group (its targets as the request's table has them): the listener ids any of its upstreams disables. */
const groupDisabled = new WeakMap<readonly RouteTarget[], readonly string[]>();

/**
 * The listeners a sampling decision skips: those any upstream of the group disables, as for
 * middleware (docs/reference/middleware.md#disabling-per-endpoint). Sampling happens before an
 * upstream is picked (the request body is captured as it is forwarded), so the rule cannot depend on
 * which one serves, nor on the order the config lists them.
 */
function disabledInGroup(targets: readonly RouteTarget[]): readonly string[] {
  if (targets.length <= 1) return targets.length === 0 ? NO_IDS : targets[0]!.disabledListeners;
  let disabled = groupDisabled.get(targets);
  if (disabled === undefined) {
    const ids = new Set(targets.flatMap((target) => target.disabledListeners));
    disabled = ids.size === 0 ? NO_IDS : [...ids];
    groupDisabled.set(targets, disabled);
  }
  return disabled;
}

export class DonePhase {
  constructor(
    private readonly state: DataPlaneState,
    private readonly accept: AcceptPhase,
    private readonly observe: RequestObserve | null,
  ) {}

  /** At routing time: the listeners that sample this request get a capture of it and of its answer. */
  sample(ctx: RequestContext): void {
    const samplers = this.state.samplers;
    if (samplers.length === 0) return;
    let sampled: RequestListener[] | null = null;
    const disabled = disabledInGroup(ctx.targets);
    for (const listener of samplers) {
      if (disabled.length > 0 && disabled.includes(listener.id)) continue;
      if (listener.sample!(ctx)) (sampled ??= []).push(listener);
    }
    if (sampled === null) return;
    ctx.capture = new Capture(sampled, this.state.config.limits.maxBodyBytes);
    ctx.observe(ctx.capture);
  }

  /** The request is over (answered, forwarded and answered, or its client left): every listener is told. */
  done(ctx: RequestContext): void {
    ctx.endedAt = performance.now();
    // A call given up before it ended (the client left, the body was refused mid-stream): its time runs to now.
    if (ctx.upstreamMs < 0 && ctx.upstreamSentAt > 0) ctx.upstreamMs = ctx.endedAt - ctx.upstreamSentAt;
    this.accept.clientAddress(ctx);
    this.hideQueryKeys(ctx);
    this.observe?.finish(ctx, ctx.endedAt);
    const listeners = this.state.listeners;
    const disabled = ctx.disabledListeners;
    const capture = ctx.capture;
    for (let i = 0; i < listeners.length; i++) {
      const listener = listeners[i]!;
      let kept: Capture | null = null;
      if (listener.sample !== undefined) {
        if (capture === null || !capture.listeners.includes(listener)) continue;
        kept = capture;
      } else if (disabled.length > 0 && listener.always !== true && disabled.includes(listener.id)) {
        continue;
      }
      try {
        listener.done(ctx, kept);
      } catch (err) {
        reportBug(err);
      }
    }
  }

  /**
   * An apiKeyAuth query parameter never reaches a listener or a span (the access log writes the query
   * of every request, whatever the answer and whether or not apiKeyAuth ran): the request is over, so
   * its query is only read from now on. Nothing to do when no entry reads a query key.
   */
  private hideQueryKeys(ctx: RequestContext): void {
    const names = this.state.pipeline.secretQuery;
    if (names !== null) ctx.query = stripQueryParameters(ctx.query, names);
  }

  /** A relayed WebSocket connection is over: the listeners that log connections are told. */
  connectionDone(ctx: RequestContext, connection: ConnectionSummary): void {
    this.hideQueryKeys(ctx);
    // A sampled upgrade's spans run to the connection's end, as its access-log line does.
    this.observe?.finish(ctx, performance.now());
    const disabled = ctx.disabledListeners;
    for (const listener of this.state.listeners) {
      if (listener.connectionDone === undefined) continue;
      if (disabled.length > 0 && disabled.includes(listener.id)) continue;
      try {
        listener.connectionDone(ctx, connection);
      } catch (err) {
        reportBug(err);
      }
    }
  }
}
