/**
 * WebSocket proxying: the uWS WebSocket route of the data plane. An upgrade request is routed like a
 * GET, passes the middleware, gets a host from the balancer and breakers, and the gateway opens the
 * upstream WebSocket first (same path and query, end-to-end headers, the subprotocols the client
 * offered). Only when the upstream answered 101 is the client's upgrade completed, with the
 * subprotocol the upstream chose; otherwise the client gets the upstream's HTTP answer, or 502/504.
 *
 * Anything that does not route (a built-in path, no endpoint, a malformed request) is handed to the
 * data plane's ordinary request path, which answers it as it answers any GET.
 *
 * The upstream leg is the gateway's own RFC 6455 client (./upstream-socket.ts says why it is not
 * `ws`). The relay costs measured with bench:ws are in docs/websocket.md.
 */
import { performance } from 'node:perf_hooks';
import type { GatewayConfig } from '../config/types.js';
import { fieldValue, withoutNames } from '../http/header-list.js';
import { writeHeaders } from '../http/cork-budget.js';
import { writeContent, writeProblem } from '../http/problem-json.js';
import { RecordedReply, sendClosing } from '../lifecycle/uws/closing-reply.js';
import { remoteAddress } from '../http/remote-address.js';
import { RequestHead } from '../http/client-request-head.js';
import type { Counters } from '../metrics/counters.js';
import type { Pipeline } from '../middleware/pipeline.js';
import type { Answer } from '../middleware/types.js';
import type { UwsModule, UwsRequest, UwsResponse, UwsSocketContext, UwsWebSocketBehavior } from '../native/uws-types.js';
import type { Breakers } from '../proxy/upstream-breakers.js';
import { CONNECT_TIMEOUT, tlsHandshakeFailure } from '../proxy/forward-errors.js';
import { RequestContext } from '../exchange/context.js';
import type { RoutingTable } from '../routing/table.js';
import type { ConnectionSummary } from '../exchange/listener.js';
import { acceptedHeaders } from './accepted-headers.js';
import { UpgradeCork } from './upgrade-cork.js';
import { handshakeRequestProblem } from './handshake-request.js';
import { HIGH_WATER, Relay, type ClientSlot, type RelayEnd, type RelayHost } from './relay.js';
import { WebSocketMetrics, type UpgradeOutcome } from './metrics.js';
import { webSocketSettings, type WebSocketConfig } from './settings.js';
import { UpstreamSocket, type HandshakeFailure, type HandshakeHandler, type UpstreamSocketOptions } from './upstream-socket.js';
import type { UpstreamTlsOptions } from '../upstream/pool.js';
import { poolSettings } from '../proxy/host-pools.js';

/** What the data plane lends the WebSocket route. */
export interface WebSocketHost {
  readonly via: string;
  readonly breakers: Breakers;
  readonly counters: Counters | null;
  /** The data plane is shutting down. */
  closing(): boolean;
  table(): RoutingTable | null;
  pipeline(): Pipeline;
  /**
   * The accept and route steps of any request (src/lifecycle/accept.ts, route.ts: limits, the target,
   * the Host, built-ins, virtual hosts, the routing table): true when ctx is routed to an endpoint
   * (ctx.path, route and targets set), false when the data plane answers the same GET itself.
   */
  route(head: RequestHead, ctx: RequestContext): boolean;
  /** Answers the request as the data plane answers any request (synchronously, inside the handler); `secure`: it came over TLS. */
  serveAsHttp(res: UwsResponse, req: UwsRequest, secure: boolean): void;
  /** What every request gets before anything can answer it: request ID and trace context (into ctx.headers and the answer's own headers). */
  begin(ctx: RequestContext): void;
  /** X-Forwarded-*, Via and the trusted proxies' headers, into ctx.headers. */
  addForwardingHeaders(head: RequestHead, ctx: RequestContext): void;
  /** The client address per trustedProxies. */
  clientAddress(ctx: RequestContext): string;
  /** A host for ctx's route (balancer, breakers), not `excluding`; sets ctx.upstream. Null: none may take it. */
  pick(ctx: RequestContext, excluding: string): string | null;
  /** The TLS settings of an https:// upstream as the data plane's requests use them now (reloads included). */
  upstreamTls(upstream: string): UpstreamTlsOptions | undefined;
  /** A wss:// upstream's TLS handshake failed: the operator's warn line (Node's error as `cause`). */
  upstreamTlsFailed(upstream: string, cause: unknown): void;
  /** The request ended as an HTTP answer (no relayed connection): logged and counted like any request. */
  requestDone(ctx: RequestContext): void;
  /** An upgrade waits (middleware, the upstream's answer): counted in flight, as a request is, so a shutdown's drain waits for it. */
  hold(ctx: RequestContext): void;
  /** It waits no more (answered, upgraded or abandoned). */
  release(ctx: RequestContext): void;
  /** A relayed connection ended: the listeners that log connections (the access log) are told. */
  connectionDone(ctx: RequestContext, connection: ConnectionSummary): void;
}

/** Most WebSocket close frames leave within this after a shutdown's close (then the sockets are cut). */
const CLOSE_FLUSH_MS = 250;
/** A Sec-WebSocket-Key: 16 bytes in base64, 22 characters and "==" (RFC 6455 4.1; the rule ws applies too). */
const HANDSHAKE_KEY = /^[A-Za-z0-9+/]{22}==$/;


/** Headers the upstream socket writes itself, or that only belong to the client's own handshake. */
const HANDSHAKE_HEADERS = new Set(['sec-websocket-key', 'sec-websocket-version', 'sec-websocket-extensions', 'sec-websocket-protocol']);
/** Not passed back from a refusing upstream: hop-by-hop, framing (uWS writes its own), Date (uWS writes one). */
const NOT_PASSED_BACK = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'upgrade', 'te', 'trailer', 'proxy-authenticate', 'proxy-connection', 'date', 'via']);
const NO_HOST = 'no upstream can take this request now (circuit breakers open)';
const NOT_ASCII = /[\u0080-\uffff]/;

export class WebSocketProxy implements RelayHost {
  readonly settings: WebSocketConfig;
  readonly maxPayloadBytes: number;
  readonly maxUnsent: number;
  /** poolSettings(config)'s, read once: it spreads two objects per call. */
  private readonly maxResponseHeaderBytes: number;
  readonly metrics: WebSocketMetrics;
  readonly relays = new Set<Relay>();
  /** Upgrades waiting for their middleware or the upstream's answer. */
  private pending = 0;
  /** For the plain listener and for the TLS one: they differ in whether the upgrade came over TLS. */
  readonly behavior: UwsWebSocketBehavior<ClientSlot>;
  readonly tlsBehavior: UwsWebSocketBehavior<ClientSlot>;
  private readonly head = new RequestHead();
  private readonly sweepTimer: NodeJS.Timeout;
  private onEmpty: (() => void) | null = null;
  /** Where clients' upgrades are completed (./upgrade-cork.ts says why not in their own cork). */
  readonly upgradeCork: UpgradeCork;

  constructor(
    private readonly host: WebSocketHost,
    private readonly config: GatewayConfig,
    uws: UwsModule,
  ) {
    this.upgradeCork = new UpgradeCork(uws, (detail) => process.emitWarning(detail, 'WebSocketWarning'));
    const settings = (this.settings = webSocketSettings(config.websocket));
    this.maxPayloadBytes = settings.maxPayloadBytes;
    this.maxUnsent = settings.maxPayloadBytes + 4 * HIGH_WATER;
    this.maxResponseHeaderBytes = poolSettings(config).maxResponseHeaderBytes;
    this.metrics = new WebSocketMetrics(host.counters);
    this.behavior = this.behaviorWith(settings, uws, this.onUpgrade);
    this.tlsBehavior = this.behaviorWith(settings, uws, this.onTlsUpgrade);
    const every = Math.max(50, Math.min(1000, settings.idleTimeoutMs / 4));
    this.sweepTimer = setInterval(() => this.sweep(), every);
    this.sweepTimer.unref();
  }

  private behaviorWith(settings: WebSocketConfig, uws: UwsModule, upgrade: UwsWebSocketBehavior<ClientSlot>['upgrade']): UwsWebSocketBehavior<ClientSlot> {
    return {
      compression: settings.compression ? uws.SHARED_COMPRESSOR : uws.DISABLED,
      // uWS 20.30 drops a client whose message passes this limit without a close frame (1006). Twice
      // the configured limit lets a message just over it arrive whole, so the relay can close with
      // 1009; only a message over twice the limit still ends as a 1006 for the client.
      maxPayloadLength: Math.min(2 * settings.maxPayloadBytes, 0x7fffffff),
      // Pings from uWS keep a live client's socket open; the relay's own idle rule (messages, pings) closes with 1001.
      idleTimeout: Math.min(960, Math.max(8, Math.ceil(settings.idleTimeoutMs / 1000))),
      sendPingsAutomatically: true,
      maxBackpressure: Math.min(HIGH_WATER + 2 * settings.maxPayloadBytes + HIGH_WATER, 0xffffffff),
      closeOnBackpressureLimit: false,
      upgrade,
      open: (ws) => ws.getUserData().relay?.clientOpened(ws),
      message: (ws, message, isBinary) => ws.getUserData().relay?.fromClient(message, isBinary),
      // uWS answers the ping; the idle rule counts it (relay.ts says why the client's pongs do not count).
      ping: (ws) => ws.getUserData().relay?.onControlFrame(),
      drain: (ws) => ws.getUserData().relay?.clientDrained(),
      close: (ws, code, message) => ws.getUserData().relay?.clientClosed(code, message),
    };
  }

  /**
   * Shutdown: new upgrades are refused (503) from now; those waiting for the upstream's answer may
   * complete within `graceMs`, and connections still open after it are closed with 1001 on both sides.
   * Resolves when none is left and their close frames have had CLOSE_FLUSH_MS to leave.
   */
  async shutDown(graceMs: number): Promise<void> {
    const open = this.relays.size > 0 || this.pending > 0;
    if (open) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, graceMs);
        this.onEmpty = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.onEmpty = null;
    }
    clearInterval(this.sweepTimer);
    if (!open) return;
    for (const relay of [...this.relays]) relay.closeBoth(1001, 'the gateway is shutting down');
    // Also when every connection ended by itself during the wait: the close frame answering the last
    // one (a client's own close, or the upstream's passed on) may not have left yet.
    await new Promise((resolve) => setTimeout(resolve, CLOSE_FLUSH_MS));
  }

  // ---- RelayHost ------------------------------------------------------------------------------------

  ended({ relay, code, closedBy }: RelayEnd): void {
    if (!this.relays.delete(relay)) return;
    const seconds = (performance.now() - relay.startedAt) / 1000;
    this.report(relay);
    this.metrics.closed(seconds);
    this.host.connectionDone(relay.ctx, {
      durationMs: seconds * 1000,
      messagesIn: relay.messagesToUpstream,
      bytesIn: relay.bytesToUpstream,
      messagesOut: relay.messagesToClient,
      bytesOut: relay.bytesToClient,
      closeCode: code,
      closedBy,
    });
    if (this.relays.size === 0 && this.pending === 0) this.onEmpty?.();
  }

  // ---- upgrade ----------------------------------------------------------------------------------

  private readonly onUpgrade = (res: UwsResponse, req: UwsRequest, context: UwsSocketContext): void => {
    this.guardedUpgrade(res, req, context, false);
  };

  private readonly onTlsUpgrade = (res: UwsResponse, req: UwsRequest, context: UwsSocketContext): void => {
    this.guardedUpgrade(res, req, context, true);
  };

  private guardedUpgrade(res: UwsResponse, req: UwsRequest, context: UwsSocketContext, secure: boolean): void {
    try {
      this.upgrade(res, req, context, secure);
    } catch (err) {
      process.emitWarning(err instanceof Error ? err : new Error(String(err)), 'DataPlaneError');
      try {
        res.cork(() => writeProblem(res, 500, 'the gateway failed to handle the request', { via: this.host.via, closeConnection: true }));
      } catch {
        // Already answered or gone.
      }
    }
  }

  /** Synchronous, inside the uWS handler (`req` is valid only now). `secure`: it came over TLS. */
  private upgrade(res: UwsResponse, req: UwsRequest, context: UwsSocketContext, secure: boolean): void {
    const host = this.host;
    if (!this.settings.enabled || req.getHeader('upgrade').toLowerCase() !== 'websocket') return host.serveAsHttp(res, req, secure);
    if (host.closing()) {
      writeProblem(res, 503, 'the gateway is shutting down', { via: host.via, closeConnection: true });
      this.metrics.upgrade('rejected');
      return;
    }
    const malformed = handshakeRequestProblem(req);
    if (malformed !== null) {
      writeProblem(res, 400, malformed, { via: host.via, closeConnection: true });
      this.metrics.upgrade('rejected');
      return;
    }
    const key = req.getHeader('sec-websocket-key');
    // RFC 6455 4.2.1-4.2.2: a handshake the gateway cannot complete as asked is refused here, not
    // passed on as a version 13 handshake of the gateway's own.
    const version = req.getHeader('sec-websocket-version');
    if (version !== '13') {
      const detail = version === '' ? 'the WebSocket handshake has no Sec-WebSocket-Version' : 'this WebSocket version is not spoken here, only 13';
      writeProblem(res, version === '' ? 400 : 426, detail, { via: host.via, closeConnection: true, headers: ['sec-websocket-version', '13'] });
      this.metrics.upgrade('rejected');
      return;
    }
    if (!HANDSHAKE_KEY.test(key)) {
      writeProblem(res, 400, 'the WebSocket handshake has no Sec-WebSocket-Key of 16 bytes in base64', { via: host.via, closeConnection: true });
      this.metrics.upgrade('rejected');
      return;
    }
    const head = this.head.read(req);
    // Either may come on several lines (RFC 6455 11.3.2, 11.3.4), and req.getHeader reads only the first.
    const offered = fieldValue(head.forward, 'sec-websocket-protocol') ?? '';
    const extensions = fieldValue(head.forward, 'sec-websocket-extensions') ?? '';
    if (head.hasBody) return host.serveAsHttp(res, req, secure);
    head.peer = remoteAddress(res.getRemoteAddress());
    head.startedAt = performance.now();
    head.secure = secure;
    // uWS calls upgrade only for a GET; a head that announces a body went on as HTTP above.
    const ctx = new RequestContext(head);
    host.begin(ctx);
    // The same steps as the same GET's: what does not reach an endpoint that way is answered as that GET.
    if (!host.route(head, ctx)) return host.serveAsHttp(res, req, secure);
    const route = ctx.route!;
    host.addForwardingHeaders(head, ctx);
    ctx.clientAddress = host.clientAddress(ctx);
    const pending = new PendingUpgrade(this, host, res, ctx, key, splitProtocols(offered), extensions, context);
    res.onAborted(() => pending.aborted());
    this.pending++;
    host.hold(ctx);
    const pipeline = host.pipeline();
    const list = pipeline.forUpgrade(route);
    if (list.length === 0) {
      if (pipeline.guarded) pipeline.guard(ctx);
      return pending.admitted();
    }
    pipeline.run(ctx, list, 0, (answer) => (answer === null ? pending.admitted() : pending.answer(answer, 'rejected')));
  }

  /** The upstream accepted and the client's socket is being upgraded: from now on a relay. */
  adopt(relay: Relay): void {
    this.relays.add(relay);
    this.metrics.upgrade('accepted');
    this.pendingEnded(relay.ctx);
  }

  upgradeEnded(ctx: RequestContext, outcome: UpgradeOutcome): void {
    this.metrics.upgrade(outcome);
    this.host.requestDone(ctx);
    this.pendingEnded(ctx);
  }

  private pendingEnded(ctx: RequestContext): void {
    this.pending--;
    this.host.release(ctx);
    if (this.relays.size === 0 && this.pending === 0) this.onEmpty?.();
  }

  /** How to open the upstream leg of `ctx` to `upstream` (an origin), offering `protocols`. */
  upstreamOptions(upstream: string, ctx: RequestContext, protocols: readonly string[]): UpstreamSocketOptions {
    return {
      origin: upstream,
      target: ctx.query === '' ? ctx.path : `${ctx.path}?${ctx.query}`,
      headers: upstreamHeaders(ctx.headers),
      protocols,
      maxPayload: this.maxPayloadBytes,
      connectTimeoutMs: this.config.timeouts.connectMs,
      handshakeTimeoutMs: this.config.timeouts.upstreamMs,
      maxResponseHeaderBytes: this.maxResponseHeaderBytes,
      // Read at each upgrade, from where requests read it: a reload that changes an upstream's TLS
      // settings (a CA file's contents, serverName, verification) holds for both legs at once.
      tls: this.host.upstreamTls(upstream),
    };
  }

  private sweep(): void {
    if (this.relays.size === 0) return;
    const now = performance.now();
    for (const relay of this.relays) {
      if (relay.idleFor(now, this.settings.idleTimeoutMs)) relay.closeBoth(1001, 'idle timeout');
      else this.report(relay);
    }
  }

  private report(relay: Relay): void {
    const r = relay.reported;
    if (relay.messagesToUpstream === r.messagesToUpstream && relay.messagesToClient === r.messagesToClient) return;
    this.metrics.flow(
      relay.messagesToUpstream - r.messagesToUpstream,
      relay.bytesToUpstream - r.bytesToUpstream,
      relay.messagesToClient - r.messagesToClient,
      relay.bytesToClient - r.bytesToClient,
    );
    r.messagesToUpstream = relay.messagesToUpstream;
    r.bytesToUpstream = relay.bytesToUpstream;
    r.messagesToClient = relay.messagesToClient;
    r.bytesToClient = relay.bytesToClient;
  }

}

/** An upgrade between the client's request and the upstream's answer. */
class PendingUpgrade implements HandshakeHandler {
  private clientGone = false;
  private done = false;
  private socket: UpstreamSocket | null = null;
  private retried = false;
  /** The host the current attempt went to. */
  private upstream = '';

  constructor(
    private readonly proxy: WebSocketProxy,
    private readonly host: WebSocketHost,
    private readonly res: UwsResponse,
    private readonly ctx: RequestContext,
    private readonly key: string,
    private readonly protocols: string[],
    private readonly extensions: string,
    private readonly context: UwsSocketContext,
  ) {}

  aborted(): void {
    this.clientGone = true;
    if (this.done) return;
    this.done = true;
    this.socket?.terminate();
    this.ctx.status = 499;
    this.proxy.upgradeEnded(this.ctx, 'aborted');
  }

  /** The middleware let it through. */
  admitted(): void {
    if (this.done) return;
    this.connect('');
  }

  /** A middleware's (or the gateway's) answer instead of an upgrade. */
  answer(answer: Answer, outcome: UpgradeOutcome): void {
    if (this.done) return;
    this.done = true;
    const { res, ctx } = this;
    const via = this.host.via;
    ctx.status = answer.status;
    const own = ctx.responseHeaders;
    if (answer.kind === 'content') {
      // An upstream's refusal: its header values go back as the bytes they were.
      const options = { via, headersOnly: false, closeConnection: true, headers: own, latin1: outcome === 'refused' };
      if (answer.status === 204 || answer.status === 304) {
        // Without a body uWS would end the answer and keep reading the connection it says it closes
        // (src/lifecycle/uws/closing-reply.ts): recorded, sent, and the connection closed.
        const recorded = new RecordedReply();
        ctx.bytesOut = writeContent(recorded, answer.status, answer.headers, answer.body, options);
        sendClosing(res, recorded);
      } else {
        res.cork(() => {
          ctx.bytesOut = writeContent(res, answer.status, answer.headers, answer.body, options);
        });
      }
    } else {
      const headers = answer.headers === undefined ? own : own === null ? answer.headers : [...answer.headers, ...own];
      res.cork(() => {
        ctx.bytesOut = writeProblem(res, answer.status, answer.detail, { via, closeConnection: true, headers });
      });
    }
    this.proxy.upgradeEnded(ctx, outcome);
  }

  private connect(excluding: string): void {
    const { ctx, host } = this;
    const upstream = host.pick(ctx, excluding);
    if (upstream === null) return this.answer({ kind: 'problem', status: 503, detail: NO_HOST }, 'rejected');
    this.upstream = upstream;
    // For the client span (a sampled request): from the first attempt; its end is the connection's.
    if (ctx.upstreamStartedAt === 0) ctx.upstreamStartedAt = performance.now();
    try {
      this.socket = new UpstreamSocket(this.proxy.upstreamOptions(upstream, ctx, this.protocols), this);
    } catch (err) {
      // An offered subprotocol that is not a token, or a header that cannot be written.
      return this.answer({ kind: 'problem', status: 400, detail: `the upgrade cannot be forwarded as sent: ${(err as Error).message}` }, 'rejected');
    }
  }

  /** HandshakeHandler: the upstream answered 101. */
  onOpen(socket: UpstreamSocket, upstreamHeaders: string[]): void {
    this.host.breakers.onSuccess(this.upstream, this.ctx.routeId);
    if (this.clientGone || this.done) {
      socket.close(1001, 'the client went away');
      return;
    }
    this.done = true;
    const ctx = this.ctx;
    ctx.status = 101;
    ctx.upstreamStatus = 101;
    const relay = new Relay(this.proxy, socket, ctx, this.proxy.settings.compression);
    this.proxy.adopt(relay);
    const slot: ClientSlot = { relay };
    const accepted = acceptedHeaders(upstreamHeaders);
    // As on any answer: the gateway's own headers (X-Request-Id), and not the upstream's of those names.
    const headers = ctx.hiddenResponseHeaders === null ? accepted : withoutNames(accepted, ctx.hiddenResponseHeaders);
    const own = ctx.responseHeaders;
    const res = this.res;
    const via = this.host.via;
    res.cork(() => {
      // uWS's upgrade() writes its status line only when none was written: headers written after our
      // own status line go out ahead of the ones upgrade() adds (native-notes.md, WebSockets).
      res.writeStatus('101 Switching Protocols');
      // The upstream's header values go back as the bytes they were (read as latin1), not as UTF-8:
      // a string of ASCII is those bytes already (a Buffer per value cost about 1,000 instructions).
      for (let i = 0; i < headers.length; i += 2) {
        const value = headers[i + 1]!;
        res.writeHeader(headers[i]!, NOT_ASCII.test(value) ? Buffer.from(value, 'latin1') : value);
      }
      if (own !== null) writeHeaders(res, own);
      res.writeHeader('via', via);
    });
    // Not in res's own cork: uWS 20.30 may close the client right after the 101 there (./upgrade-cork.ts).
    this.proxy.upgradeCork.upgrade(res, () => res.upgrade(slot, this.key, socket.protocol, this.extensions, this.context));
  }

  /** HandshakeHandler: the upstream answered something other than 101; the client gets that answer. */
  onRefused(status: number, upstreamHeaders: string[], body: Buffer | null): void {
    const routeId = this.ctx.routeId;
    this.ctx.upstreamStatus = status;
    this.ctx.upstreamEndedAt = performance.now();
    if (status >= 500) this.host.breakers.onFailure(this.upstream, routeId);
    else this.host.breakers.onSuccess(this.upstream, routeId);
    if (this.done) return;
    if (body === null) return this.answer({ kind: 'problem', status: 502, detail: 'the upstream refused the upgrade with an answer that could not be read or was too large' }, 'failed');
    const hidden = this.ctx.hiddenResponseHeaders;
    const headers: string[] = [];
    for (let i = 0; i < upstreamHeaders.length; i += 2) {
      const name = upstreamHeaders[i]!;
      if (!NOT_PASSED_BACK.has(name) && !name.startsWith('proxy-') && !(hidden?.includes(name) ?? false)) headers.push(name, upstreamHeaders[i + 1]!);
    }
    this.answer({ kind: 'content', status, headers, body }, 'refused');
  }

  /** HandshakeHandler: no answer in time, no connection, or an answer that is not valid. */
  onFailed(kind: HandshakeFailure, detail: string, cause?: unknown): void {
    if (this.done) return;
    const { ctx, host } = this;
    host.breakers.onFailure(this.upstream, ctx.routeId);
    // As for any request (src/proxy/forward-errors.ts): the TLS failure's warn line, its counter and its
    // 502; a connect timeout's 504 and counter.
    const known = kind === 'tls' ? tlsHandshakeFailure(cause) : kind === 'connectTimeout' ? CONNECT_TIMEOUT : null;
    if (kind === 'tls') host.upstreamTlsFailed(this.upstream, cause);
    if ((kind === 'unsent' || kind === 'connectTimeout' || kind === 'tls') && !this.retried && ctx.targets.length > 1 && !host.closing()) {
      this.retried = true;
      host.counters?.add('retries.afterConnectFailure');
      return this.connect(this.upstream);
    }
    host.counters?.add(known?.counter ?? (kind === 'timeout' ? 'upstreamFailures.timeouts' : kind === 'unsent' ? 'upstreamFailures.connectFailures' : 'upstreamFailures.resets'));
    // The client span's error.type, in the upstream client's words where it has them.
    ctx.upstreamError = kind === 'timeout' ? 'headers_timeout' : kind === 'connectTimeout' ? 'connect_timeout' : kind === 'unsent' ? 'connect_failed' : kind === 'tls' ? 'tls' : 'bad_response';
    ctx.upstreamEndedAt = performance.now();
    const answer =
      kind === 'timeout'
        ? { kind: 'problem' as const, status: 504, detail: 'the upstream did not answer the upgrade in time' }
        : known !== null
          ? { kind: 'problem' as const, status: known.status, detail: known.detail }
          : { kind: 'problem' as const, status: 502, detail: kind === 'unsent' ? `the upstream gave no answer (${detail})` : `the upstream's answer to the upgrade was not valid (${detail})` };
    this.answer(answer, 'failed');
  }
}

/** The offered subprotocols, as the client listed them. */
function splitProtocols(header: string): string[] {
  if (header === '') return [];
  return header.split(',').map((p) => p.trim()).filter((p) => p !== '');
}

/** ctx.headers (flat, lower-case names) without the handshake's own; repeated names are joined, as they reached the upstream before. */
function upstreamHeaders(flat: readonly string[]): string[] {
  const joined = new Map<string, string>();
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i]!;
    if (HANDSHAKE_HEADERS.has(name)) continue;
    const value = flat[i + 1]!;
    const previous = joined.get(name);
    joined.set(name, previous === undefined ? value : `${previous}${name === 'cookie' ? '; ' : ', '}${value}`);
  }
  const headers: string[] = [];
  for (const [name, value] of joined) headers.push(name, value);
  return headers;
}
