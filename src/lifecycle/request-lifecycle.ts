/**
 * One request, start to end: accept → route → decide → forward → respond → done.
 *
 *   accept   src/lifecycle/accept.ts           head checks, path normalization, client address
 *   route    src/lifecycle/route.ts            built-ins, then the routing table
 *   decide   src/lifecycle/decide.ts           middleware, in order (held while one is asynchronous)
 *   forward  src/lifecycle/forward.ts          balancer, breakers, upstream call with retry, body pump
 *   respond  src/lifecycle/respond.ts          the response chain: observers, substitution, local replies
 *   done     src/lifecycle/done.ts             every listener, once
 *
 * The transport adapter (src/lifecycle/uws/uws-accept.ts) reads the head, builds the request context
 * and the client's side, and calls handle() inside its handler. Nothing here knows the transport.
 */
import type { Counters } from '../metrics/counters.js';
import { problem, type Answer, type BuiltinAnswer, type LocalReply } from '../exchange/answer.js';
import type { BuiltinsHook } from '../exchange/builtins.js';
import type { RequestObserve } from '../observe/request-observe.js';
import type { Warn } from '../proxy/upstream-tls-failures.js';
import type { ClientSide } from '../exchange/client.js';
import type { RequestContext } from '../exchange/context.js';
import type { RequestHead } from '../http/client-request-head.js';
import { AcceptPhase } from './accept.js';
import type { BodyPump } from './body-pump.js';
import { DecidePhase, HELD, type DecisionTaker } from './decide.js';
import { DonePhase } from './done.js';
import { ForwardPhase } from './forward.js';
import { ResponseChain } from './respond.js';
import { RoutePhase } from './route.js';
import { reportBug } from './report-bug.js';
import { holdRequest } from './held.js';
import type { DataPlaneState } from './state.js';

export interface LifecycleOptions {
  builtins: BuiltinsHook | null;
  /** Request IDs and traces: begun at accept, spans recorded at done. */
  observe: RequestObserve | null;
  counters: Counters | null;
  onBreakersChanged: (() => void) | null;
  /** Where what an operator should see is logged (upstream TLS handshake failures); null: nowhere. */
  warn: Warn | null;
}

export class RequestLifecycle implements DecisionTaker {
  readonly accept: AcceptPhase;
  readonly router: RoutePhase;
  readonly decider: DecidePhase;
  readonly forwarder: ForwardPhase;
  readonly chain: ResponseChain;
  readonly finisher: DonePhase;
  private readonly observe: RequestObserve | null;

  constructor(
    private readonly state: DataPlaneState,
    options: LifecycleOptions,
  ) {
    this.accept = new AcceptPhase(state.config, state.via);
    this.router = new RoutePhase(state, options.builtins);
    this.observe = options.observe;
    this.decider = new DecidePhase(state, this, options.observe);
    this.chain = new ResponseChain(this.finished);
    this.forwarder = new ForwardPhase(state, this.chain, options.counters, options.onBreakersChanged, options.warn);
    this.finisher = new DonePhase(state, this.accept, options.observe);
  }

  /** Synchronous, inside the transport's handler: `head` is valid only now. */
  handle(head: RequestHead, ctx: RequestContext, client: ClientSide): void {
    ctx.client = client;
    // Before anything can answer: every answer carries the request ID.
    this.begin(ctx);
    // An answer inside the handler with a body still unread closes the connection (else the body would be read and thrown away).
    const unread = ctx.hasBody;

    const refusal = this.accept.check(head, ctx);
    if (refusal !== null) return this.chain.reply(ctx, client, refusal.answer, refusal.close || unread);

    const routed = this.router.route(head, ctx);
    if (routed !== null) {
      if (routed.kind === 'later') return this.replyLater(ctx, client, routed.answer, unread);
      return this.chain.reply(ctx, client, routed, unread);
    }
    const tooLarge = this.accept.bodyRefusal(ctx);
    if (tooLarge !== null) return this.chain.reply(ctx, client, tooLarge, unread);
    this.accept.addForwardingHeaders(head, ctx);
    this.accept.clientAddress(ctx);
    this.finisher.sample(ctx);

    const decision = this.decider.decide(ctx);
    if (decision === HELD) return;
    if (decision !== null) return this.chain.reply(ctx, client, decision, unread);

    const instead = this.forwarder.forward(ctx, client, null);
    if (instead !== null) this.chain.reply(ctx, client, instead, unread);
  }

  /**
   * handle()'s accept and route steps alone: true when ctx is routed to an endpoint, false when handle()
   * would answer it. A WebSocket upgrade is routed with this, so it reaches exactly what the same GET would.
   */
  routes(head: RequestHead, ctx: RequestContext): boolean {
    return this.accept.check(head, ctx) === null && this.router.route(head, ctx) === null && this.accept.bodyRefusal(ctx) === null;
  }

  /** Request ID and trace context (src/observe/); a WebSocket upgrade's handler calls it too. */
  begin(ctx: RequestContext): void {
    this.observe?.begin(ctx, this.accept.trust);
  }

  /**
   * A built-in answered later (the metrics): the request is held, counted in flight and its client
   * watched, until the answer comes. A body it carries is read and dropped meanwhile (`close`: the
   * connection is closed after the answer, as for a built-in answered at once).
   */
  private replyLater(ctx: RequestContext, client: ClientSide, answer: Promise<BuiltinAnswer>, close: boolean): void {
    const settle = holdRequest(ctx, this.state, () => this.chain.over(ctx, false), () => {});
    const reply = (local: LocalReply): void => {
      if (settle()) this.chain.reply(ctx, client, local, close);
    };
    answer.then(
      (builtin) => reply({ kind: 'builtin', answer: builtin }),
      (err: unknown) => {
        reportBug(err);
        reply(problem(500, 'the gateway failed to handle the request'));
      },
    );
  }

  /** A bug of ours reached the handler: a 500 if nothing was written yet. */
  failed(ctx: RequestContext, client: ClientSide): void {
    if (client.ended) return;
    this.chain.reply(ctx, client, problem(500, 'the gateway failed to handle the request'), ctx.hasBody);
  }

  // ---- a held request's middleware decided (DecisionTaker) -------------------------------------

  decided(ctx: RequestContext, pump: BodyPump, answer: Answer | null): void {
    const client = ctx.client!;
    let reply: LocalReply | null = pump.tooLarge ? problem(413, `the request body is larger than ${this.state.config.limits.maxBodyBytes} bytes`) : answer;
    if (reply === null) reply = this.forwarder.forward(ctx, client, pump);
    if (reply === null) return;
    pump.stop();
    this.chain.reply(ctx, client, reply, !pump.whole);
  }

  abandoned(ctx: RequestContext): void {
    this.chain.over(ctx, false);
  }

  /** Respond's end: the request is over. */
  private readonly finished = (ctx: RequestContext): void => {
    const state = this.state;
    if (ctx.inFlight) {
      ctx.inFlight = false;
      state.inFlight--;
    }
    this.finisher.done(ctx);
    if (state.inFlight === 0) state.onDrained?.();
  };
}
