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
}
