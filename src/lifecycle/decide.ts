/**
 * Decide: the route's middleware, in config order (Pipeline). Synchronous decisions cost a loop step
 * and hold nothing; at the first asynchronous one the request is held (counted in flight, its client
 * watched, its body kept by a BodyPump) until the outcome, then answered or forwarded.
 */
import type { Answer } from '../exchange/answer.js';
import type { RequestContext } from '../exchange/context.js';
import { DECIDING, type PipelineDone } from '../middleware/pipeline.js';
import { BodyPump } from './body-pump.js';
import { holdRequest } from './held.js';
import type { DataPlaneState } from './state.js';
import type { RequestObserve } from '../observe/request-observe.js';

/** What happens to a held request once its middleware decided. */
export interface DecisionTaker {
  /** Answer it (`answer`), or forward it with what `pump` holds (`answer` null). */
  decided(ctx: RequestContext, pump: BodyPump, answer: Answer | null): void;
  /** The client left while its middleware decided: the request is over. */
  abandoned(ctx: RequestContext): void;
}

/** The request is held until its middleware decide; the DecisionTaker finishes it. */
export const HELD = Symbol('held');

export class DecidePhase {
  constructor(
    private readonly state: DataPlaneState,
    private readonly taker: DecisionTaker,
    private readonly observe: RequestObserve | null,
  ) {}

  /** Runs the routed request's middleware: an answer, null to forward now, or HELD. */
  decide(ctx: RequestContext): Answer | null | typeof HELD {
    const state = this.state;
    const pipeline = state.pipeline;
    const middleware = pipeline.forRoute(ctx.route!);
    if (middleware.length === 0) {
      if (pipeline.guarded) pipeline.guard(ctx);
      pipeline.bystand(ctx);
      return null;
    }
    this.observe?.middlewareStarted(ctx);
    const outcome = pipeline.decide(ctx, middleware, this.hold);
    if (outcome === DECIDING) return HELD;
    this.observe?.middlewareEnded(ctx);
    return outcome;
  }

  /** A middleware decides asynchronously: called inside the handler, so the client can be watched now. */
  private readonly hold = (ctx: RequestContext): PipelineDone => {
    const pump = new BodyPump(ctx, ctx.client!, this.state.config.limits.maxBodyBytes);
    const settle = holdRequest(
      ctx,
      this.state,
      () => {
        pump.stop();
        this.taker.abandoned(ctx);
      },
      (chunk, isLast) => pump.onClientData(chunk, isLast),
    );
    return (answer) => {
      if (!settle()) return;
      this.observe?.middlewareEnded(ctx);
      this.taker.decided(ctx, pump, answer);
    };
  };
}
