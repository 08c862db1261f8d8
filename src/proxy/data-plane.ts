/**
 * The worker's HTTP data plane: a uWS app (SO_REUSEPORT, so every worker binds the same port) that
 * routes each request with the compiled table and forwards it to an upstream through the gateway's
 * own HTTP/1.1 client (src/upstream/).
 *
 * Per request: read the head synchronously, check limits, normalize the path, ask the built-ins,
 * select the endpoint, pick a host, check its breakers, dispatch. See forward.ts for the exchange.
 */
// The module binding, not the global: globalThis.performance is an accessor, read on every call (about 12% of a now() call on Node 20).
import { performance } from 'node:perf_hooks';
import type { GatewayConfig } from '../config/types.js';
import { normalizePath } from '../http/normalize-path.js';
import { writeBuiltinAnswer } from '../builtins/write-answer.js';
import { writeContent, writeProblem } from '../http/problem.js';
import { remoteAddress } from '../http/remote-address.js';
import { RequestHead } from '../http/request-head.js';
import { hasEncodedSlash, isVisibleAscii } from '../http/request-target.js';
import { TrustedProxies } from '../http/trusted-proxies.js';
import { statusLine } from '../http/status-line.js';
import { loadUws, type LoadedUws } from '../native/uws.js';
import type { UwsApp, UwsListenSocket, UwsRequest, UwsResponse } from '../native/uws-types.js';
import { emptySelection, type RoutingTable } from '../routing/table.js';
import { HostWeights, RouteBalancer } from './balancer.js';
import { Breakers, type CircuitReport } from './breaker.js';
import type {
  BuiltinAnswer,
  BuiltinsHook,
  DataPlane,
  DataPlaneOptions,
  RequestDoneInfo,
  UpstreamWeight,
} from './data-plane-types.js';
import { Exchange, type ExchangeHost } from './forward.js';
import { RequestContext, type ResponseObserver } from './request-context.js';
import { HeldRequest, type HeldRequestHost } from './held-request.js';
import { Capture, type RequestListener } from '../listeners/capture.js';
import { DECIDING, Pipeline } from '../middleware/pipeline.js';
import { problem, type Answer, type ContentAnswer, type Middleware } from '../middleware/types.js';
import type { ForwardFailure } from './forward-errors.js';
import type { Counters } from '../metrics/counters.js';
import { poolSettings, UpstreamPools } from './upstream-pool.js';
import { headerValue, type RequestObserve } from '../observe/request-observe.js';
import type { UpstreamPool } from '../upstream/pool.js';

export type {
  BuiltinAnswer,
  BuiltinsHook,
  DataPlane,
  DataPlaneOptions,
  RequestDoneInfo,
  UpstreamWeight,
} from './data-plane-types.js';

const NO_LISTENERS: readonly string[] = Object.freeze([]);
const EMPTY_PIPELINE = new Pipeline([], { add: () => {} });
const DEFAULT_WEIGHT = 1;
/** performance.timeOrigin is a getter; it never changes. */
const TIME_ORIGIN = performance.timeOrigin;

export async function startDataPlane(options: DataPlaneOptions): Promise<DataPlane> {
  const server = new DataPlaneServer(options);
  await server.listen();
  return server;
}

const NO_HOST = 'no upstream can take this request now (circuit breakers open)';

class DataPlaneServer implements DataPlane, ExchangeHost, HeldRequestHost {
  readonly uws: LoadedUws;
  readonly via: string;
  readonly viaBytes: Buffer;
  readonly maxBodyBytes: number;
  readonly breakers: Breakers;
  closing = false;
  port = 0;

  private readonly config: GatewayConfig;
  private readonly builtins: BuiltinsHook | null;
  private readonly trust: TrustedProxies;
  private readonly rejectEncodedSlashes: boolean;
  private readonly onRequestDone: ((info: RequestDoneInfo) => void) | null;
  private readonly observe: RequestObserve | null;
  private readonly app: UwsApp;
  private listenSocket: UwsListenSocket | null = null;
  private readonly weights: HostWeights;
  private readonly configuredUpstreams = new Set<string>();
  private readonly pools: UpstreamPools;
  private table: RoutingTable | null = null;
  private pipeline = EMPTY_PIPELINE;
  private listeners: readonly RequestListener[] = [];
  private balancers: RouteBalancer[] = [];

  private readonly head = new RequestHead();
  private readonly selection = emptySelection();
  private readonly info: RequestDoneInfo = {
    method: '',
    path: '',
    routeTemplate: null,
    routeId: -1,
    upstream: null,
    status: 0,
    startedAt: 0,
    latencyMs: 0,
    bytesIn: 0,
    bytesOut: 0,
    clientAddress: '',
    disabledListeners: NO_LISTENERS,
    query: '',
    requestId: '',
    traceId: '',
    userAgent: undefined,
    consumer: null,
    upstreamMs: -1,
    cache: null,
  };
  /** The response of the request the pipeline is deciding now (read by holdUntilDecided). */
  private deciding: UwsResponse | null = null;
  /** Route whose hosts the balancer is asking about (spares a closure per pick). */
  private pickingRouteId = -1;
  /** A host left out of the pick: the one a retry moves away from. */
  private pickingExcludes = '';
  private readonly isAvailable = (upstream: string): boolean =>
    upstream !== this.pickingExcludes && this.breakers.canSend(upstream, this.pickingRouteId);
  private readonly counters: Counters | null;

  private inFlightCount = 0;
  /** Exchanges still receiving a request body, checked against timeouts.clientRequestMs. */
  private readonly receiving = new Set<Exchange>();
  private readonly sweepTimer: NodeJS.Timeout;
  private onDrained: (() => void) | null = null;
  private closed: Promise<void> | null = null;

  constructor(options: DataPlaneOptions) {
    const config = options.config;
    this.config = config;
    this.uws = options.uws ?? loadUws();
    this.via = `1.1 ${config.name}`;
    this.viaBytes = Buffer.from(this.via, 'latin1');
    this.maxBodyBytes = config.limits.maxBodyBytes;
    this.builtins = options.builtins ?? null;
    this.onRequestDone = options.onRequestDone ?? null;
    this.observe = options.observe ?? null;
    this.counters = options.counters ?? null;
    const onBreakersChanged = options.onBreakersChanged ?? null;
    this.breakers = new Breakers(config.circuitBreaker, Date.now, onBreakersChanged);
    this.trust = new TrustedProxies(config.trustedProxies);
    this.rejectEncodedSlashes = config.encodedSlashes === 'reject';
    this.weights = new HostWeights(config.upstreamWeighting);
    this.pools = new UpstreamPools(poolSettings(config));
    this.pools.configure(config.upstreams);
    this.setUpstreams(config.upstreams);
    this.app = this.uws.uws.App();
    this.app.any('/*', this.onRequest);
    const sweepEvery = Math.max(20, Math.min(1000, config.timeouts.clientRequestMs / 4));
    this.sweepTimer = setInterval(() => this.sweepSlowClients(), sweepEvery);
    this.sweepTimer.unref();
  }

  listen(): Promise<void> {
    const { host, port } = this.config;
    return new Promise((resolve, reject) => {
      // uWS's default listen options set SO_REUSEPORT on Linux: every worker binds the same port.
      this.app.listen(host, port, (listenSocket) => {
        if (listenSocket === false) {
          clearInterval(this.sweepTimer);
          reject(new Error(`could not listen on ${host}:${port} (in use without SO_REUSEPORT, or not an address of this host)`));
          return;
        }
        this.listenSocket = listenSocket;
        this.port = this.uws.uws.us_socket_local_port(listenSocket);
        resolve();
      });
    });
  }

  // ---- control ---------------------------------------------------------------------------------

  setTable(table: RoutingTable): void {
    this.table = table;
    this.balancers = [];
    this.breakers.forgetRoutes();
    for (const route of table.routes()) {
      for (const target of route.targets) {
        if (!this.configuredUpstreams.has(target.upstream)) {
          this.configuredUpstreams.add(target.upstream);
          this.weights.set(target.upstream, DEFAULT_WEIGHT);
        }
      }
    }
  }

  setPipeline(pipeline: Pipeline): void {
    this.pipeline = pipeline;
  }

  setListeners(listeners: readonly RequestListener[]): void {
    this.listeners = listeners;
  }

  setUpstreams(upstreams: readonly UpstreamWeight[], config?: GatewayConfig): void {
    if (config !== undefined) this.pools.configure(config.upstreams);
    const listed = new Set<string>();
    for (const { serviceLocation, weight } of upstreams) {
      listed.add(serviceLocation);
      this.weights.set(serviceLocation, weight);
    }
    for (const known of this.configuredUpstreams) {
      if (!listed.has(known)) this.weights.remove(known);
    }
    this.configuredUpstreams.clear();
    for (const upstream of listed) this.configuredUpstreams.add(upstream);
    this.pools.retain(listed);
  }

  inFlight(): number {
    return this.inFlightCount;
  }

  breakerReport(): CircuitReport[] {
    const routes = this.table?.routes() ?? [];
    return this.breakers.report((routeId) => {
      const route = routes[routeId];
      return route === undefined ? null : `${route.method} ${route.template}`;
    });
  }

  tripBreaker(upstream: string, endpoint: string | null): void {
    if (endpoint === null) return this.breakers.trip(upstream, null);
    const route = this.table?.routes().find((r) => `${r.method} ${r.template}` === endpoint);
    if (route !== undefined) this.breakers.trip(upstream, route.id);
  }

  close(): Promise<void> {
    this.closed ??= this.shutDown();
    return this.closed;
  }

  private async shutDown(): Promise<void> {
    this.closing = true;
    if (this.listenSocket !== null) {
      this.uws.uws.us_listen_socket_close(this.listenSocket);
      this.listenSocket = null;
    }
    const graceMs = this.config.timeouts.shutdownGraceMs;
    if (this.inFlightCount > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, graceMs);
        this.onDrained = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.onDrained = null;
    }
    // Idle keep-alive connections, and whatever outlived the grace (their onAborted runs now).
    this.app.close?.();
    clearInterval(this.sweepTimer);
    await this.pools.close(Math.min(graceMs, 1000));
  }

  // ---- ExchangeHost ----------------------------------------------------------------------------

  exchangeDone(exchange: Exchange): void {
    this.inFlightCount--;
    this.receiving.delete(exchange);
    this.emitDone(exchange.ctx);
    if (this.inFlightCount === 0) this.onDrained?.();
  }

  retryTarget(exchange: Exchange, failure: ForwardFailure): string | null {
    const ctx = exchange.ctx;
    if (ctx.targets.length < 2 || this.closing) return null;
    const balancer = this.balancers[ctx.routeId];
    if (balancer === undefined) return null;
    this.pickingRouteId = ctx.routeId;
    this.pickingExcludes = ctx.upstream ?? '';
    const target = balancer.pick(ctx.targets, this.weights, this.isAvailable, false);
    this.pickingExcludes = '';
    if (target === null) return null;
    this.counters?.add(failure.retry === 'unsent' ? 'retries.afterConnectFailure' : 'retries.afterNoAnswer');
    return target.upstream;
  }

  poolFor(upstream: string): UpstreamPool {
    return this.pools.get(upstream);
  }

  upstreamFailed(failure: ForwardFailure): void {
    if (failure.counter !== null) this.counters?.add(failure.counter);
  }

  // ---- request path ----------------------------------------------------------------------------

  private readonly onRequest = (res: UwsResponse, req: UwsRequest): void => {
    const startedAt = performance.now();
    const head = this.head.read(req);
    const peer = remoteAddress(res.getRemoteAddress());
    const ctx = new RequestContext(head.method, head.url, head.query, peer, head.xForwardedFor, startedAt, head.hasBody, head.forward);
    ctx.bodyLength = head.contentLength;
    try {
      this.observe?.begin(ctx, this.trust);
      this.route(res, head, ctx);
    } catch (err) {
      // A bug of ours must not take the worker down with every connection it holds.
      process.emitWarning(err instanceof Error ? err : new Error(String(err)), 'DataPlaneError');
      try {
        this.answer(res, ctx, 500, 'the gateway failed to handle the request');
      } catch {
        // The response was already answered or closed.
      }
    }
  };

  /** Synchronous, inside the uWS handler: `head` is only valid now. */
  private route(res: UwsResponse, head: RequestHead, ctx: RequestContext): void {
    const { limits } = this.config;
    if (head.headerBytes > limits.maxHeaderBytes) {
      return this.answer(res, ctx, 431, `the request headers are larger than ${limits.maxHeaderBytes} bytes`);
    }
    // Bad framing or an ambiguous head leaves the connection untrustworthy: it is closed after the answer.
    if (head.badFraming) return this.answer(res, ctx, 400, 'conflicting or invalid Content-Length / Transfer-Encoding', '', true);
    if (head.conflict !== '') return this.answer(res, ctx, 400, head.conflict, '', true);
    if (head.contentLength > limits.maxBodyBytes) {
      return this.answer(res, ctx, 413, `the request body is larger than ${limits.maxBodyBytes} bytes`);
    }
    const method = ctx.method;
    if (!isVisibleAscii(head.url) || !isVisibleAscii(ctx.query)) {
      return this.answer(res, ctx, 400, 'the request target holds characters that must be percent-encoded');
    }
    if (this.rejectEncodedSlashes && hasEncodedSlash(head.url)) {
      return this.answer(res, ctx, 400, 'the path holds an encoded "/" or "\\" (%2F, %5C), which an upstream could read as a segment boundary');
    }
    const path = normalizePath(head.url);
    if (path === null) return this.answer(res, ctx, 400, 'the request path is malformed or climbs above the root');
    ctx.path = path;
    if (this.builtins !== null) {
      const builtin = this.builtins(method, path, ctx.query, head.view);
      if (builtin !== null) return this.answerBuiltin(res, ctx, builtin);
    }
    const table = this.table;
    if (table === null) return this.answer(res, ctx, 503, 'the routing table is not loaded yet');
    const view = head.view;
    const selection = table.select(method, path, view['content-type'], view.accept, ctx.hasBody, this.selection);
    if (selection.status !== 200) {
      return this.answer(res, ctx, selection.status, rejectionDetail(selection.status, method), selection.allow);
    }
    if (selection.autoOptions) return this.answerOptions(res, ctx, selection.allow);

    const route = selection.route!;
    ctx.route = route;
    ctx.targets = selection.targets;
    ctx.headAsGet = selection.headAsGet;
    this.addForwardingHeaders(head, ctx);
    if (this.listeners.length > 0) this.sampleListeners(ctx);
    const middleware = this.pipeline.forRoute(route, table.routes());
    if (middleware.length > 0) return this.hold(res, ctx, middleware);

    const exchange = this.newExchange(res, ctx);
    if (exchange === null) return this.answer(res, ctx, 503, NO_HOST);
    this.forwardNow(res, exchange);
  }

  /** Picks the host (balancer, breakers) and prepares the exchange; null when no host may take it now. */
  private newExchange(res: UwsResponse, ctx: RequestContext): Exchange | null {
    const route = ctx.route!;
    let balancer = this.balancers[route.id];
    if (balancer === undefined) this.balancers[route.id] = balancer = new RouteBalancer();
    this.pickingRouteId = route.id;
    const target = balancer.pick(ctx.targets, this.weights, this.isAvailable);
    if (target === null) return null;
    ctx.upstream = target.upstream;
    ctx.disabledListeners = target.disabledListeners;
    return new Exchange(
      this,
      res,
      ctx,
      this.pools.get(target.upstream),
      ctx.headAsGet ? 'GET' : ctx.method,
      ctx.query === '' ? ctx.path : `${ctx.path}?${ctx.query}`,
    );
  }

  /** Listeners that sample this request get a capture of it and of its answer (see listeners/capture.ts). */
  private sampleListeners(ctx: RequestContext): void {
    let sampled: RequestListener[] | null = null;
    const disabled = ctx.targets.length > 0 ? ctx.targets[0].disabledListeners : NO_LISTENERS;
    for (const listener of this.listeners) {
      if (disabled.length > 0 && disabled.includes(listener.id)) continue;
      if (listener.sample(ctx)) (sampled ??= []).push(listener);
    }
    if (sampled === null) return;
    ctx.capture = new Capture(sampled, this.config.limits.maxBodyBytes);
    ctx.observe(ctx.capture);
  }

  private awaitBody(exchange: Exchange): void {
    exchange.receiveDeadline = exchange.ctx.startedAt + this.config.timeouts.clientRequestMs;
    this.receiving.add(exchange);
  }

  // ---- requests held while middleware decides (HeldRequestHost) --------------------------------

  private hold(res: UwsResponse, ctx: RequestContext, middleware: readonly Middleware[]): void {
    // Rate limits key on it: decided once, here.
    ctx.clientAddress = this.trust.clientAddress(ctx.peer, ctx.forwardedFor);
    this.deciding = res;
    this.observe?.middlewareStarted(ctx);
    const outcome = this.pipeline.decide(ctx, middleware, this.holdUntilDecided);
    this.deciding = null;
    if (outcome === DECIDING) return;
    this.observe?.middlewareEnded(ctx);
    // Every middleware decided at once (auth, a local rate limit with tokens, a cache miss): nothing is
    // held; answered, or forwarded as a request without middleware is. Body bytes are still unread.
    if (outcome !== null) return this.answerUnforwarded(res, ctx, outcome);
    const exchange = this.newExchange(res, ctx);
    if (exchange === null) return this.answerUnforwarded(res, ctx, noHostAnswer(ctx));
    this.forwardNow(res, exchange);
  }

  /** The exchange goes upstream now; `res` is watched for the client leaving, its body streamed. */
  private forwardNow(res: UwsResponse, exchange: Exchange): void {
    this.inFlightCount++;
    res.onAborted(() => exchange.onClientAborted());
    const hasBody = exchange.ctx.hasBody;
    if (hasBody) {
      this.awaitBody(exchange);
      res.onData((chunk, isLast) => exchange.onClientData(chunk, isLast));
    }
    exchange.start(hasBody);
  }

  /** Answers a request that goes no further than its middleware, inside its handler. */
  private answerUnforwarded(res: UwsResponse, ctx: RequestContext, answer: Answer): void {
    this.writeAnswer(res, ctx, answer, ctx.hasBody);
    this.unforwarded(ctx);
  }

  /**
   * A middleware decides asynchronously: the request is held (its connection watched, its body kept)
   * until the pipeline's outcome. Called inside the uWS handler.
   */
  private readonly holdUntilDecided = (ctx: RequestContext): ((answer: Answer | null) => void) => {
    const res = this.deciding!;
    const held = new HeldRequest(this, res, ctx);
    this.inFlightCount++;
    res.onAborted(() => held.onAborted());
    if (ctx.hasBody) res.onData((chunk, isLast) => held.onData(chunk, isLast));
    return (answer) => {
      this.observe?.middlewareEnded(ctx);
      held.decided(answer);
    };
  };

  forwardHeld(held: HeldRequest): Exchange | null {
    const exchange = this.newExchange(held.res, held.ctx);
    if (exchange === null) {
      this.answerHeld(held, noHostAnswer(held.ctx), !held.complete);
      this.heldDone(held);
      return null;
    }
    if (held.ctx.hasBody && !held.complete) this.awaitBody(exchange);
    exchange.startHeld(held.chunks, held.complete, held.paused);
    return exchange;
  }

  answerHeld(held: HeldRequest, answer: Answer, close: boolean): void {
    this.writeAnswer(held.res, held.ctx, answer, close);
  }

  heldDone(held: HeldRequest): void {
    this.inFlightCount--;
    this.unforwarded(held.ctx);
    if (this.inFlightCount === 0) this.onDrained?.();
  }

  /** A middleware's answer (or one in place of an upstream's); `close` when body bytes remain unread. */
  private writeAnswer(res: UwsResponse, ctx: RequestContext, answer: Answer, close: boolean): void {
    res.cork(() => {
      ctx.status = answer.status;
      const headersOnly = ctx.method === 'HEAD';
      const closeConnection = close || this.closing;
      if (answer.kind === 'content') {
        ctx.cache = headerValue(answer.headers, 'x-cache');
        ctx.bytesOut = writeContent(res, answer.status, answer.headers, answer.body, { via: this.via, headersOnly, closeConnection, headers: ctx.responseHeaders });
        return;
      }
      const own = ctx.responseHeaders;
      const headers = answer.headers === undefined ? own : own === null ? answer.headers : [...answer.headers, ...own];
      ctx.bytesOut = writeProblem(res, answer.status, answer.detail, { via: this.via, headersOnly, closeConnection, headers });
    });
  }

  /** It ended without an upstream answer: observers a middleware registered learn it is over; reported. */
  private unforwarded(ctx: RequestContext): void {
    const observers = ctx.observers;
    if (observers !== null) for (let i = observers.length - 1; i >= 0; i--) observers[i].onAbort();
    this.emitDone(ctx);
  }

  /**
   * End-to-end request headers plus X-Forwarded-*, Via and, from a trusted proxy only, the client's
   * Forwarded and X-Real-IP (contract 7). From any other peer the gateway speaks for the client itself.
   */
  private addForwardingHeaders(head: RequestHead, ctx: RequestContext): void {
    const headers = ctx.headers;
    const peer = ctx.peer;
    const host = head.view.host;
    if (this.trust.isTrusted(peer)) {
      headers.push('x-forwarded-for', head.xForwardedFor === undefined ? peer : `${head.xForwardedFor}, ${peer}`);
      headers.push('x-forwarded-proto', head.xForwardedProto ?? 'http');
      const forwardedHost = head.xForwardedHost ?? host;
      if (forwardedHost) headers.push('x-forwarded-host', forwardedHost);
      if (head.forwarded !== undefined) headers.push('forwarded', `${head.forwarded}, for=${forwardedNode(peer)}`);
      if (head.xRealIp !== undefined) headers.push('x-real-ip', head.xRealIp);
    } else {
      headers.push('x-forwarded-for', peer, 'x-forwarded-proto', 'http');
      if (host) headers.push('x-forwarded-host', host);
    }
    headers.push('via', head.via === undefined ? this.via : `${head.via}, ${this.via}`);
  }

  private sweepSlowClients(): void {
    if (this.receiving.size === 0) return;
    const now = performance.now();
    for (const exchange of this.receiving) {
      if (!exchange.receiving) {
        // The body is complete; the exchange waits for the upstream, which upstreamMs bounds.
        this.receiving.delete(exchange);
      } else if (now > exchange.receiveDeadline) {
        this.receiving.delete(exchange);
        exchange.onClientTooSlow();
      }
    }
  }

  // ---- answers of the gateway's own (synchronous, inside the handler's cork) ---------------------

  private answer(res: UwsResponse, ctx: RequestContext, status: number, detail: string, allow = '', close = false): void {
    ctx.status = status;
    ctx.bytesOut = writeProblem(res, status, detail, {
      allow,
      via: this.via,
      headersOnly: ctx.method === 'HEAD',
      // An unread body would otherwise be read and thrown away.
      closeConnection: close || ctx.hasBody || this.closing,
      headers: ctx.responseHeaders,
    });
    this.emitDone(ctx);
  }

  private answerOptions(res: UwsResponse, ctx: RequestContext, allow: string): void {
    res.writeStatus(statusLine(200));
    res.writeHeader('allow', allow);
    res.writeHeader('via', this.via);
    const own = ctx.responseHeaders;
    if (own !== null) for (let i = 0; i < own.length; i += 2) res.writeHeader(own[i], own[i + 1]);
    res.end('', ctx.hasBody || this.closing);
    ctx.status = 200;
    this.emitDone(ctx);
  }

  private answerBuiltin(res: UwsResponse, ctx: RequestContext, answer: BuiltinAnswer): void {
    const headersOnly = ctx.method === 'HEAD';
    // A HEAD has no body left unread: only a closing gateway asks for the connection to close.
    ctx.bytesOut = writeBuiltinAnswer(res, answer, headersOnly, headersOnly ? this.closing : ctx.hasBody || this.closing, ctx.responseHeaders);
    ctx.status = answer.status;
    this.emitDone(ctx);
  }

  /** The request is over (answered, forwarded and answered, or the client left): tell the listeners. */
  private emitDone(ctx: RequestContext): void {
    if (this.onRequestDone === null && ctx.capture === null && this.observe === null) return;
    const info = this.info;
    const now = performance.now();
    info.method = ctx.method;
    info.path = ctx.path;
    info.routeTemplate = ctx.routeTemplate;
    info.routeId = ctx.routeId;
    info.upstream = ctx.upstream;
    info.status = ctx.status;
    info.bytesIn = ctx.bytesIn;
    info.bytesOut = ctx.bytesOut;
    info.disabledListeners = ctx.disabledListeners;
    info.startedAt = TIME_ORIGIN + ctx.startedAt;
    info.latencyMs = now - ctx.startedAt;
    info.clientAddress = ctx.clientAddress === '' ? (ctx.clientAddress = this.trust.clientAddress(ctx.peer, ctx.forwardedFor)) : ctx.clientAddress;
    this.observe?.finish(ctx, info, now);
    try {
      this.onRequestDone?.(info);
    } catch (err) {
      process.emitWarning(err instanceof Error ? err : new Error(String(err)), 'DataPlaneError');
    }
    const capture = ctx.capture;
    if (capture !== null) {
      for (const listener of capture.listeners) {
        try {
          listener.done(ctx, capture);
        } catch (err) {
          process.emitWarning(err instanceof Error ? err : new Error(String(err)), 'DataPlaneError');
        }
      }
    }
  }
}

/** The first content an observer offers in place of a failed answer (in reverse registration order), or null. */
/**
 * The answer when no host may take a routed request (breakers open): an upstream failure, which
 * observers a middleware registered may answer for (stale-if-error), else a 503.
 */
function noHostAnswer(ctx: RequestContext): Answer {
  const instead = ctx.observers === null ? null : substituteFor(ctx.observers, 503);
  return instead ?? problem(503, NO_HOST);
}

function substituteFor(observers: readonly ResponseObserver[], status: number): ContentAnswer | null {
  for (let i = observers.length - 1; i >= 0; i--) {
    const answer = observers[i].substitute(status);
    if (answer !== null) return answer;
  }
  return null;
}

/** A Forwarded `for=` node (RFC 7239 6): IPv6 is quoted and bracketed. */
function forwardedNode(address: string): string {
  return address.indexOf(':') === -1 ? address : `"[${address}]"`;
}

function rejectionDetail(status: number, method: string): string {
  switch (status) {
    case 404:
      return 'no endpoint matches this path';
    case 405:
      return `no endpoint matching this path accepts ${method}`;
    case 406:
      return 'no endpoint for this request can produce what Accept asks for';
    case 415:
      return 'no endpoint for this request consumes this Content-Type';
    default:
      return 'the request cannot be routed';
  }
}
