/**
 * Forward: a routed, admitted request goes to one host of its endpoint. The balancer picks among the
 * hosts the breakers let through; the call goes through the upstream pool with a RetryHandler around
 * the ProxiedResponse; the request body (if any) is pumped into it. Also the hosts' side of the
 * control surface: weights, pools, breakers.
 */
import { performance } from 'node:perf_hooks';
import type { GatewayConfig } from '../config/types.js';
import { problem, type Answer } from '../exchange/answer.js';
import type { ClientSide } from '../exchange/client.js';
import { SEND_AGAIN } from '../exchange/observer.js';
import type { RequestContext } from '../exchange/context.js';
import type { Counters } from '../metrics/counters.js';
import type { RoutingTable } from '../routing/table.js';
import type { UpstreamError } from '../upstream/call-errors.js';
import type { UpstreamPool } from '../upstream/pool.js';
import { HostWeights, RouteBalancer, type WeightRamp } from '../proxy/balancer.js';
import { Breakers } from '../proxy/upstream-breakers.js';
import type { ForwardFailure } from '../proxy/forward-errors.js';
import { poolSettings, UpstreamPools } from '../proxy/host-pools.js';
import type { UpstreamTlsOptions } from '../upstream/pool.js';
import { TlsFailureLog, type Warn } from '../proxy/upstream-tls-failures.js';
import { BodyPump } from './body-pump.js';
import { ProxiedResponse } from './proxied-response.js';
import type { ResponseChain } from './respond.js';
import type { BodySink } from './legs.js';
import { RetryHandler, type RetryHost } from './retry-handler.js';
import type { DataPlaneState } from './state.js';

export interface UpstreamWeight {
  serviceLocation: string;
  weight: number;
  /** The primary's ramp towards `weight`, when one is under way (HostWeights.ramp). */
  ramp?: WeightRamp;
}

const DEFAULT_WEIGHT = 1;
const NO_HOST = 'no upstream can take this request now (circuit breakers open)';

/** A route's balancer and its availability question (breakers for that route), made once per route. */
class RouteHosts {
  readonly balancer = new RouteBalancer();
  readonly isAvailable: (upstream: string) => boolean;

  constructor(breakers: Breakers, routeId: number) {
    this.isAvailable = (upstream) => breakers.canSend(upstream, routeId);
  }
}

export class ForwardPhase implements RetryHost {
  readonly breakers: Breakers;
  private readonly weights: HostWeights;
  private readonly configuredUpstreams = new Set<string>();
  private readonly pools: UpstreamPools;
  private routes: Array<RouteHosts | undefined> = [];
  /** Pumps still receiving a request body, checked against timeouts.clientRequestMs. */
  private readonly receiving = new Set<BodyPump>();
  private readonly sweepTimer: NodeJS.Timeout;
  private readonly tlsFailures: TlsFailureLog | null;

  constructor(
    private readonly state: DataPlaneState,
    private readonly chain: ResponseChain,
    private readonly counters: Counters | null,
    onBreakersChanged: (() => void) | null,
    warn: Warn | null = null,
  ) {
    const config = state.config;
    this.tlsFailures = warn === null ? null : new TlsFailureLog(warn);
    this.breakers = new Breakers(config.circuitBreaker, Date.now, onBreakersChanged);
    this.weights = new HostWeights(config.upstreamWeighting);
    this.pools = new UpstreamPools(poolSettings(config));
    this.pools.configure(config.upstreams);
    this.setUpstreams(config.upstreams);
    const sweepEvery = Math.max(20, Math.min(1000, config.timeouts.clientRequestMs / 4));
    // Judged in the check phase, after the loop's poll for I/O: after a stall of this thread (a long GC,
    // a synchronous task) the body bytes that arrived meanwhile are read before the deadline is.
    this.sweepTimer = setInterval(() => {
      if (this.receiving.size > 0) setImmediate(this.sweepSlowClients);
    }, sweepEvery);
    this.sweepTimer.unref();
  }

  /**
   * Forwards `ctx` now; `pump` holds what arrived of its body while middleware decided (null: nothing
   * was held). Returns the answer to give instead when no host may take it now (breakers open).
   */
  forward(ctx: RequestContext, client: ClientSide, pump: BodyPump | null): Answer | null {
    const upstream = this.pickHost(ctx);
    if (upstream === null) return this.noHostAnswer(ctx);

    const state = this.state;
    if (!ctx.inFlight) {
      ctx.inFlight = true;
      state.inFlight++;
    }
    const response = new ProxiedResponse(ctx, client, this.chain);
    const retry = new RetryHandler(this, response, ctx.headAsGet ? 'GET' : ctx.method, ctx.query === '' ? ctx.path : `${ctx.path}?${ctx.query}`);
    response.leg = retry;
    client.watch(response);
    if (!ctx.hasBody) {
      retry.send(upstream, null);
      return null;
    }
    const wasHeld = pump !== null;
    pump ??= new BodyPump(ctx, client, state.config.limits.maxBodyBytes);
    response.pump = pump;
    retry.onBodyDrain = () => pump.drained();
    // Without this removal when the request ends, the set kept every body request's context alive
    // until the next sweep (negotiation-memory test: +110 MB over 16,000 requests with 7 KB headers).
    pump.sweptBy(this.receiving, ctx.startedAt + state.config.timeouts.clientRequestMs);
    pump.attach(response, {
      sendWhole: (body) => retry.send(upstream, body),
      sendStreamed: (length): BodySink => {
        retry.sendStreamed(upstream, length);
        return retry;
      },
    }, wasHeld);
    return null;
  }

  /**
   * A host of ctx's route the breakers let through (balancer order), other than `excluding` (a retry's
   * failed host: the rotation is then left as it is). Null when none may take it. ctx.upstream is set
   * only once a call to the host is made (the retry handler's attempt): a request refused before that
   * (its body too large or too slow) was not upstream traffic.
   */
  pickHost(ctx: RequestContext, excluding = ''): string | null {
    const route = ctx.route!;
    let hosts = this.routes[route.id];
    if (hosts === undefined) this.routes[route.id] = hosts = new RouteHosts(this.breakers, route.id);
    const available = excluding === '' ? hosts.isAvailable : (u: string) => u !== excluding && hosts.isAvailable(u);
    const target = hosts.balancer.pick(ctx.targets, this.weights, available, excluding === '');
    if (target === null) return null;
    ctx.disabledListeners = target.disabledListeners;
    return target.upstream;
  }

  /**
   * The answer when no host may take a routed request (breakers open): an upstream failure, which
   * observers a middleware registered may answer for (stale-if-error), else a 503.
   */
  private noHostAnswer(ctx: RequestContext): Answer {
    const answer = this.chain.substitute(ctx, 503);
    return answer === null || answer === SEND_AGAIN ? problem(503, NO_HOST) : answer;
  }

  // ---- RetryHost -------------------------------------------------------------------------------

  retryTarget(ctx: RequestContext, failure: ForwardFailure): string | null {
    if (ctx.targets.length < 2 || this.state.closing) return null;
    const next = this.pickHost(ctx, ctx.upstream ?? '');
    if (next === null) return null;
    this.counters?.add(failure.retry === 'unsent' ? 'retries.afterConnectFailure' : 'retries.afterNoAnswer');
    return next;
  }

  poolFor(upstream: string): UpstreamPool {
    return this.pools.get(upstream);
  }

  upstreamFailed(failure: ForwardFailure): void {
    if (failure.counter !== null) this.counters?.add(failure.counter);
  }

  upstreamResent(): void {
    this.counters?.add('retries.staleConnection');
  }

  tlsHandshakeFailed(upstream: string, err: UpstreamError): void {
    this.reportTlsFailure(upstream, err.cause);
  }

  /** The warn line for a failed TLS handshake with `upstream` (at most one per upstream every 10 s), `cause` Node's error. */
  reportTlsFailure(upstream: string, cause: unknown): void {
    this.tlsFailures?.report(upstream, cause);
  }

  breakerSuccess(upstream: string, routeId: number): void {
    this.breakers.onSuccess(upstream, routeId);
  }

  breakerFailure(upstream: string, routeId: number): void {
    this.breakers.onFailure(upstream, routeId);
  }

  // ---- control ---------------------------------------------------------------------------------

  /** A new table: balancers and route breakers start over; its hosts get the default weight unless configured. */
  setTable(table: RoutingTable): void {
    this.routes = [];
    for (const route of table.routes()) {
      for (const target of route.targets) {
        if (!this.configuredUpstreams.has(target.upstream)) {
          this.configuredUpstreams.add(target.upstream);
          this.weights.set(target.upstream, DEFAULT_WEIGHT);
        }
      }
    }
    // The breakers of hosts neither the config nor the table names go (a copy: setUpstreams clears the set).
    this.breakers.forgetRoutes(new Set(this.configuredUpstreams));
  }

  /** An upstream's TLS settings, the same for the WebSocket leg as for requests (UpstreamPools.configure took them last). */
  upstreamTls(upstream: string): UpstreamTlsOptions | undefined {
    return this.pools.tlsFor(upstream);
  }

  setUpstreams(upstreams: readonly UpstreamWeight[], config?: GatewayConfig): void {
    if (config !== undefined) this.pools.configure(config.upstreams);
    const listed = new Set<string>();
    for (const { serviceLocation, weight, ramp } of upstreams) {
      listed.add(serviceLocation);
      this.weights.set(serviceLocation, weight, ramp);
    }
    this.weights.retain(listed);
    this.configuredUpstreams.clear();
    for (const upstream of listed) this.configuredUpstreams.add(upstream);
    this.pools.retain(listed);
  }

  close(graceMs: number): Promise<void> {
    clearInterval(this.sweepTimer);
    return this.pools.close(graceMs);
  }

  private readonly sweepSlowClients = (): void => {
    if (this.receiving.size === 0) return;
    const now = performance.now();
    for (const pump of this.receiving) {
      if (!pump.receiving) {
        // The body is complete (or the request over); the upstream's answer is bounded by upstreamMs.
        this.receiving.delete(pump);
      } else if (pump.overdue(now)) {
        this.receiving.delete(pump);
        pump.tooSlow();
      }
    }
  };
}
