/**
 * The accept adapter for uWebSockets.js: the app and its listen socket (SO_REUSEPORT, so every worker
 * binds the same port), and the handler that reads a request's head, builds its context and client
 * side, and runs the lifecycle. uWS hands the head only during the handler.
 */
// The module binding, not the global: globalThis.performance is an accessor, read on every call (about 12% of a now() call on Node 20).
import { performance } from 'node:perf_hooks';
import { RequestContext } from '../../exchange/context.js';
import { remoteAddress } from '../../http/remote-address.js';
import { RequestHead } from '../../http/client-request-head.js';
import type { LoadedUws } from '../../native/uws.js';
import type { UwsRequest, UwsResponse, UwsWebSocketBehavior } from '../../native/uws-types.js';
import type { GatewayConfig } from '../../config/types.js';
import { EdgeListeners } from '../../edge/listeners.js';
import type { RequestLifecycle } from '../request-lifecycle.js';
import { reportBug } from '../report-bug.js';
import type { DataPlaneState } from '../state.js';
import { handlerBegan, handlerReturned, UwsClient } from './uws-client.js';
import type { Counters } from '../../metrics/counters.js';
import { WebSocketProxy, type WebSocketHost } from '../../websocket/upgrade.js';
import { redirectAuthority } from '../../edge/tls-redirect.js';

export class UwsAcceptor {
  /** The plain app and the TLS app with its certificates (src/edge/listeners.ts). */
  private readonly edge: EdgeListeners;
  /** Read anew for every request (uWS's request object is valid only in the handler). */
  private readonly head = new RequestHead();

  /** Upgrade requests (GET with Sec-WebSocket-Key) go here; the others fall through to onRequest. */
  private readonly webSockets: WebSocketProxy;

  constructor(
    private readonly uws: LoadedUws,
    private readonly state: DataPlaneState,
    private readonly lifecycle: RequestLifecycle,
    counters: Counters | null,
  ) {
    this.webSockets = new WebSocketProxy(this.webSocketHost(counters), state.config, uws.uws);
    this.edge = new EdgeListeners(uws, state.config, {
      plain: this.onRequest,
      plainRedirect: this.onRedirectedRequest,
      tls: this.onTlsRequest,
      ws: this.webSockets.behavior as UwsWebSocketBehavior<never>,
      wss: this.webSockets.tlsBehavior as UwsWebSocketBehavior<never>,
    });
  }

  /** The plain port, or the TLS port when the plain one is off. */
  get port(): number {
    return this.edge.port;
  }

  get tlsPort(): number {
    return this.edge.tlsPort;
  }

  setCertificates(config: GatewayConfig): void {
    this.edge.setCertificates(config.tls);
  }

  /** What the WebSocket route (src/websocket/) uses of the lifecycle. */
  private webSocketHost(counters: Counters | null): WebSocketHost {
    const { state, lifecycle } = this;
    return {
      via: state.via,
      breakers: lifecycle.forwarder.breakers,
      counters,
      closing: () => state.closing,
      table: () => state.table,
      pipeline: () => state.pipeline,
      serveAsHttp: (res, req, secure) => this.handle(res, req, secure),
      route: (head, ctx) => lifecycle.routes(head, ctx),
      begin: (ctx) => lifecycle.begin(ctx),
      addForwardingHeaders: (head, ctx) => lifecycle.accept.addForwardingHeaders(head, ctx),
      clientAddress: (ctx) => lifecycle.accept.clientAddress(ctx),
      pick: (ctx, excluding) => {
        // The WebSocket leg connects to the host at once: it is the request's upstream from here on.
        const upstream = lifecycle.forwarder.pickHost(ctx, excluding);
        if (upstream !== null) ctx.upstream = upstream;
        return upstream;
      },
      upstreamTls: (upstream) => lifecycle.forwarder.upstreamTls(upstream),
      upstreamTlsFailed: (upstream, cause) => lifecycle.forwarder.reportTlsFailure(upstream, cause),
      requestDone: (ctx) => lifecycle.finisher.done(ctx),
      hold: (ctx) => {
        ctx.inFlight = true;
        state.inFlight++;
      },
      release: (ctx) => {
        if (!ctx.inFlight) return;
        ctx.inFlight = false;
        if (--state.inFlight === 0) state.onDrained?.();
      },
      connectionDone: (ctx, connection) => lifecycle.finisher.connectionDone(ctx, connection),
    };
  }

  /** Refuses new upgrades now; closes open WebSocket connections with 1001 after the grace. */
  shutDownWebSockets(graceMs: number): Promise<void> {
    return this.webSockets.shutDown(graceMs);
  }

  /** Binds the configured ports (uWS sets SO_REUSEPORT: every worker binds the same ones). */
  async listen(): Promise<void> {
    await this.webSockets.upgradeCork.open();
    await this.edge.listen();
  }

  /** No new connections; open ones go on. */
  stopListening(): void {
    this.edge.stopListening();
  }

  /** Closes idle keep-alive connections and whatever is still open (their onAborted runs now). */
  closeConnections(): void {
    this.edge.closeAll();
    this.webSockets.upgradeCork.close();
  }

  private readonly onRequest = (res: UwsResponse, req: UwsRequest): void => {
    this.handleInHandler(res, req, false);
  };

  private readonly onTlsRequest = (res: UwsResponse, req: UwsRequest): void => {
    this.handleInHandler(res, req, true);
  };

  /** The plain port with `plainPort: "redirect"` (src/edge/tls-redirect.ts). */
  private readonly onRedirectedRequest = (res: UwsResponse, req: UwsRequest): void => {
    this.handleInHandler(res, req, false, true);
  };

  /** handle(), marked as inside uWS's request handler for `res` (uws-client.ts, handlerResponse). */
  private handleInHandler(res: UwsResponse, req: UwsRequest, secure: boolean, redirect = false): void {
    handlerBegan(res);
    try {
      this.handle(res, req, secure, redirect);
    } finally {
      handlerReturned();
    }
  }

  private handle(res: UwsResponse, req: UwsRequest, secure: boolean, redirect = false): void {
    const startedAt = performance.now();
    this.state.lastRequestAt = startedAt;
    const head = this.head.read(req);
    head.startedAt = startedAt;
    head.secure = secure;
    head.peer = remoteAddress(res.getRemoteAddress());
    const ctx = new RequestContext(head);
    if (redirect) ctx.tlsRedirect = redirectAuthority(head.view.host, this.edge.redirectPort);
    const client = new UwsClient(res, ctx, this.state);
    try {
      this.lifecycle.handle(head, ctx, client);
    } catch (err) {
      // A bug of ours must not take the worker down with every connection it holds.
      reportBug(err);
      try {
        this.lifecycle.failed(ctx, client);
      } catch {
        // The response was already answered or closed.
      }
    }
  }
}
