import type { Capture } from './capture.js';
import type { RequestContext } from './context.js';

/**
 * Told once that a request is over: answered, forwarded and answered, or left by its client. The
 * access log, the metrics recorder and the configured listeners (alternateUpstream) are all this, run
 * in one loop by the done phase (src/lifecycle/done.ts), after the client's answer is complete: they
 * never delay or change it. An endpoint's `x-disabled-listeners` skips the ids it lists.
 */
export interface RequestListener {
  readonly id: string;
  /** Runs even for endpoints whose x-disabled-listeners name it (the metrics recorder). */
  readonly always?: boolean;
  /**
   * Most body bytes of each side (request, answer) this listener can use from a capture; unset: all
   * the gateway accepts.
   */
  readonly maxCaptureBytes?: number;
  /**
   * At routing time: whether to capture this request's bodies for `done` (sampling, methods, in-flight
   * bound). Absent: the listener never needs a capture.
   */
  sample?(ctx: RequestContext): boolean;
  /**
   * The request is over; `capture` holds what was kept when this listener sampled the request, else
   * null. Must not throw (a throw is reported and the next listener runs).
   */
  done(ctx: RequestContext, capture: Capture | null): void;
  /**
   * A relayed WebSocket connection is over (its upgrade request is `ctx`, status 101). Only listeners
   * that log connections have this; one whose id the endpoint's x-disabled-listeners names is skipped.
   * Must not throw.
   */
  connectionDone?(ctx: RequestContext, connection: ConnectionSummary): void;
}

/** What a relayed WebSocket connection did, for whoever logs it. */
export interface ConnectionSummary {
  durationMs: number;
  /** Client to upstream. */
  messagesIn: number;
  bytesIn: number;
  /** Upstream to client. */
  messagesOut: number;
  bytesOut: number;
  /** The first close code (1006: that side was lost without a close frame). */
  closeCode: number;
  closedBy: 'client' | 'upstream' | 'gateway';
}
