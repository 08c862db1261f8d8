/**
 * The one place a routed request passes the configured middleware (docs/reference/middleware.md#order): in array
 * order, before forwarding; the first answer ends it. A decision that is synchronous costs a loop
 * step; an asynchronous one (a store round trip) is bounded by the middleware's slaMs: past it the
 * middleware is skipped and the miss counted, or, for one that fails closed, the request is answered 503.
 *
 * Counted per middleware id under `middleware.<id>.`: admitted, rejected.<status> (a problem answer),
 * answered.<status> (an answer with content: a cache hit), slaMisses, errors.
 */
import type { Route } from '../routing/table.js';
import type { RequestContext } from '../exchange/context.js';
import { CONSUMER_HEADER, LongDecision, problem, type Answer, type Decision, type FetchUpstream, type Middleware, type MiddlewareMetrics } from './types.js';
import { counterPart } from '../metrics/counters.js';
import { stripQueryParameters } from '../http/query-parameters.js';

/** Called once per run: the answer to send, or null to forward the request. */
export type PipelineDone = (answer: Answer | null) => void;

/** Pipeline.decide's outcome while a middleware's asynchronous decision is pending. */
export const DECIDING = Symbol('deciding');

/** Counter names of one middleware, built once (no string is built per request). */
class CounterNames {
  readonly admitted: string;
  readonly slaMisses: string;
  readonly errors: string;
  private readonly rejected = new Map<number, string>();
  private readonly answered = new Map<number, string>();
  private readonly prefix: string;

  constructor(id: string) {
    this.prefix = `middleware.${counterPart(id)}.`;
    this.admitted = `${this.prefix}admitted`;
    this.slaMisses = `${this.prefix}slaMisses`;
    this.errors = `${this.prefix}errors`;
  }

  rejectedWith(status: number): string {
    let name = this.rejected.get(status);
    if (name === undefined) this.rejected.set(status, (name = `${this.prefix}rejected.${status}`));
    return name;
  }

  /** The counter of an answer: rejected.<status> for a problem, answered.<status> for content. */
  of(answer: Answer): string {
    if (answer.kind === 'problem') return this.rejectedWith(answer.status);
    let name = this.answered.get(answer.status);
    if (name === undefined) this.answered.set(answer.status, (name = `${this.prefix}answered.${answer.status}`));
    return name;
  }
}

const NONE: readonly Middleware[] = Object.freeze([]);

export class Pipeline {
  private readonly names = new Map<Middleware, CounterNames>();
  /**
   * Per route object, the entries that run for it. Not per route id: a virtual host's table has routes
   * of its own with the full table's ids and only its upstreams' targets, so one id can disable
   * different middleware on different hosts.
   */
  private readonly byRoute = new WeakMap<Route, readonly Middleware[]>();
  /** Entries with a bystand hook; per route object, those of them disabled for it. */
  private readonly watchers: readonly Middleware[];
  private readonly bystandersByRoute = new WeakMap<Route, readonly Middleware[]>();
  /** Per route object, forRoute() without the entries that do not decide upgrades. */
  private readonly upgradesByRoute = new WeakMap<Route, readonly Middleware[]>();

  /**
   * With an apiKeyAuth entry, what every routed request is guarded with, whichever middleware run for
   * it (docs/reference/api-key-auth.md#on-every-endpoint): the client's X-Consumer never reaches an
   * upstream, and the header and query parameter of each entry with hideCredentials do not either.
   */
  readonly guarded: boolean;
  private readonly hiddenHeaders: readonly string[];
  private readonly hiddenQuery: readonly string[] | null;
  /** The query parameters of every apiKeyAuth entry, left out of what the access log and spans show; null when none. */
  readonly secretQuery: readonly string[] | null;

  constructor(
    readonly entries: readonly Middleware[],
    private readonly metrics: MiddlewareMetrics,
  ) {
    for (const entry of entries) this.names.set(entry, new CounterNames(entry.id));
    const credentials = entries.flatMap((entry) => (entry.credentials === undefined ? [] : [entry.credentials]));
    const unique = (names: Array<string | null>): string[] => [...new Set(names.filter((name): name is string => name !== null))];
    const hidden = credentials.filter((c) => c.hide);
    this.guarded = credentials.length > 0;
    this.hiddenHeaders = unique(hidden.map((c) => c.header));
    const hiddenQuery = unique(hidden.map((c) => c.query));
    this.hiddenQuery = hiddenQuery.length === 0 ? null : hiddenQuery;
    const secretQuery = unique(credentials.map((c) => c.query));
    this.secretQuery = secretQuery.length === 0 ? null : secretQuery;
    if (credentials.length > 0) {
      const secretHeaders = unique(credentials.map((c) => c.header));
      for (const entry of entries) entry.useCredentials?.(this.secretQuery, secretHeaders);
    }
    this.watchers = entries.filter((entry) => entry.bystand !== undefined);
  }

  /** Before the route's middleware run (guarded only): only apiKeyAuth says who the consumer is. */
  beforeRun(ctx: RequestContext): void {
    ctx.removeRequestHeader(CONSUMER_HEADER);
  }

  /** The route's middleware admitted the request (guarded only): hidden keys go, where apiKeyAuth did not run too. */
  admitted(ctx: RequestContext): void {
    const headers = this.hiddenHeaders;
    for (let i = 0; i < headers.length; i++) ctx.withhold(headers[i]!);
    const query = this.hiddenQuery;
    if (query !== null) ctx.query = stripQueryParameters(ctx.query, query);
  }

  /** For a route no middleware runs on (guarded only): the guard alone. */
  guard(ctx: RequestContext): void {
    this.beforeRun(ctx);
    this.admitted(ctx);
  }

  get empty(): boolean {
    return this.entries.length === 0;
  }

  /**
   * The entries that run for `route`: all but those an endpoint's `x-disabled-middleware` names (if any
   * upstream serving the endpoint disables one, it is off): the targets of `route` as the request's
   * table has it (a virtual host's).
   */
  forRoute(route: Route): readonly Middleware[] {
    if (this.entries.length === 0) return NONE;
    let list = this.byRoute.get(route);
    if (list === undefined) {
      const disabled = new Set(route.targets.flatMap((t) => t.disabledMiddleware));
      list = disabled.size === 0 ? this.entries : this.entries.filter((m) => !disabled.has(m.id));
      this.byRoute.set(route, list);
    }
    return list;
  }

  /** forRoute() for a WebSocket upgrade: without the entries that do not decide upgrades (Middleware.decidesUpgrades). */
  forUpgrade(route: Route): readonly Middleware[] {
    const all = this.forRoute(route);
    if (all.length === 0) return all;
    let list = this.upgradesByRoute.get(route);
    if (list === undefined) {
      list = all.some((m) => m.decidesUpgrades === false) ? all.filter((m) => m.decidesUpgrades !== false) : all;
      this.upgradesByRoute.set(route, list);
    }
    return list;
  }

  /**
   * The request was admitted (its route's middleware let it through, or none runs there): the entries
   * disabled for its route that watch requests all the same are told (Middleware.bystand).
   */
  bystand(ctx: RequestContext): void {
    if (this.watchers.length === 0) return;
    const route = ctx.route!;
    let bystanders = this.bystandersByRoute.get(route);
    if (bystanders === undefined) {
      const running = this.forRoute(route);
      bystanders = this.watchers.filter((entry) => !running.includes(entry));
      this.bystandersByRoute.set(route, bystanders);
    }
    for (let i = 0; i < bystanders.length; i++) {
      const entry = bystanders[i]!;
      try {
        entry.bystand!(ctx);
      } catch {
        // A watcher's failure (a bug of its own) is counted as its error; the request goes on as admitted.
        this.metrics.add(this.names.get(entry)!.errors);
      }
    }
  }

  /**
   * Runs `list` for `ctx` as far as its middleware decide synchronously: the answer (null to forward)
   * when every one did. At the first asynchronous decision it calls `goingAsync` (still synchronously,
   * so the caller can hold the request while its handler runs), returns DECIDING, and later passes the
   * outcome to the callback `goingAsync` returned, exactly once.
   */
  decide(ctx: RequestContext, list: readonly Middleware[], goingAsync: (ctx: RequestContext) => PipelineDone): Answer | null | typeof DECIDING {
    return this.decideFrom(ctx, list, 0, goingAsync);
  }

  /** Runs `list` from `from` for `ctx`; `done` is called exactly once, possibly synchronously. */
  run(ctx: RequestContext, list: readonly Middleware[], from: number, done: PipelineDone): void {
    const outcome = this.decideFrom(ctx, list, from, () => done);
    if (outcome !== DECIDING) done(outcome);
  }

  private decideFrom(ctx: RequestContext, list: readonly Middleware[], from: number, goingAsync: (ctx: RequestContext) => PipelineDone): Answer | null | typeof DECIDING {
    if (from === 0 && this.guarded) this.beforeRun(ctx);
    for (let i = from; i < list.length; i++) {
      const middleware = list[i]!;
      let decision: Decision | Promise<Decision> | LongDecision;
      try {
        decision = middleware.decide(ctx);
      } catch (err) {
        decision = this.failed(middleware, ctx, err);
      }
      if (decision instanceof Promise) {
        this.await(ctx, list, i, decision, middleware.slaMs, goingAsync(ctx));
        return DECIDING;
      }
      if (decision instanceof LongDecision) {
        this.await(ctx, list, i, decision.pending, decision.waitMs, goingAsync(ctx));
        return DECIDING;
      }
      if (decision !== undefined) {
        this.metrics.add(this.names.get(middleware)!.of(decision));
        return decision;
      }
      this.metrics.add(this.names.get(middleware)!.admitted);
    }
    if (this.guarded) this.admitted(ctx);
    this.bystand(ctx);
    return null;
  }

  private await(ctx: RequestContext, list: readonly Middleware[], index: number, pending: Promise<Decision>, waitMs: number, done: PipelineDone): void {
    const middleware = list[index]!;
    const names = this.names.get(middleware)!;
    let settled = false;
    const settle = (decision: Decision): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (decision !== undefined) {
        this.metrics.add(names.of(decision));
        done(decision);
        return;
      }
      this.metrics.add(names.admitted);
      this.run(ctx, list, index + 1, done);
    };
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      this.metrics.add(names.slaMisses);
      if (middleware.failClosed) {
        this.metrics.add(names.rejectedWith(503));
        done(problem(503, `${middleware.id} did not decide within its SLA of ${middleware.slaMs} ms`));
      } else {
        this.run(ctx, list, index + 1, done);
      }
    }, waitMs);
    pending.then(settle, (err: unknown) => settle(this.failed(middleware, ctx, err)));
  }

  /** A middleware that threw (a bug of its own): skipped, or 503 when it fails closed; told (failed()). */
  private failed(middleware: Middleware, ctx: RequestContext, err: unknown): Decision {
    this.metrics.add(this.names.get(middleware)!.errors);
    try {
      middleware.failed?.(ctx, err);
    } catch {
      // Its own failure handler failing changes nothing: the request goes on as decided here.
    }
    return middleware.failClosed ? problem(503, `${middleware.id} failed to decide`) : undefined;
  }

  /** The data plane installing this pipeline hands its upstream client to the middleware that want it. */
  useUpstream(fetch: FetchUpstream): void {
    for (const middleware of this.entries) middleware.useUpstream?.(fetch);
  }

  close(): Promise<void> {
    return Promise.all(this.entries.map((m) => m.close().catch(() => {}))).then(() => undefined);
  }
}
