/**
 * What the data plane asks of the observe modules, in two calls per request: begin() when the head has
 * been read (request ID, trace context, the headers the upstream and the client get), finish() when
 * the request is over (the access log's extra fields, the spans of a sampled request).
 */
import { performance } from 'node:perf_hooks';
import type { RequestContext } from '../exchange/context.js';
import type { TrustedProxies } from '../http/trusted-proxies.js';
import { isAcceptableRequestId, nextRequestId } from './request-id.js';
import { formatTraceparent, parseTraceparent, passTracestate, SAMPLED } from './trace-context.js';
import { ownedId, randomHex } from './random-hex.js';
import { RequestTrace } from '../exchange/request-trace.js';
// Types only: the SDK (about a second to load on a busy machine) is imported when tracing is configured.
import type { ExportLimits, SpanExport, TracingConfig, TracingCounters } from './tracing.js';

/** The config keys read here. */
export interface ObserveConfig {
  requestId: { enabled: boolean; header: string };
  tracing?: TracingConfig;
}

const TIME_ORIGIN = performance.timeOrigin;
/** 2^32, for the ratio sampler's reading of a trace id's last 8 hex digits. */
const TWO_POW_32 = 0x100000000;

export class RequestObserve {
  private header = '';
  /** [header]: the upstream's own request ID header is withheld, the client gets ours only. */
  private hidden: readonly string[] = [];
  private idsOn = true;
  /** Share of traces started here that are sampled; 0 without export. */
  private ratio = 0;
  private tracingKey = '';
  private spans: SpanExport | null = null;

  private constructor(
    private readonly counters: TracingCounters,
    private readonly warn: (message: string) => void,
    private readonly exportLimits: Partial<ExportLimits>,
    private readonly info: (message: string) => void,
  ) {}

  static async create(
    config: ObserveConfig,
    counters: TracingCounters,
    warn: (message: string) => void,
    exportLimits: Partial<ExportLimits> = {},
    /** Where span export's recovery line goes (the failure goes to `warn`). */
    info: (message: string) => void = warn,
  ): Promise<RequestObserve> {
    const observe = new RequestObserve(counters, warn, exportLimits, info);
    await observe.configure(config);
    return observe;
  }

  /** Takes a (re)loaded config; a changed `tracing` replaces the exporter (the old one flushes and closes). */
  async configure(config: ObserveConfig): Promise<void> {
    this.idsOn = config.requestId.enabled;
    this.header = config.requestId.header.toLowerCase();
    this.hidden = [this.header];
    const tracing = config.tracing;
    const key = tracing === undefined ? '' : JSON.stringify(tracing);
    if (key === this.tracingKey) return;
    this.tracingKey = key;
    const old = this.spans;
    if (tracing === undefined) {
      this.spans = null;
      this.ratio = 0;
    } else {
      const { SpanExport } = await import('./tracing.js');
      this.spans = new SpanExport(tracing, this.counters, this.warn, this.exportLimits, this.info);
      this.ratio = tracing.sampleRatio;
    }
    if (old !== null) void old.close();
  }

  /**
   * The request's head was read: decides its request ID and trace, rewrites those headers for the
   * upstream (ctx.headers) and adds the request ID to whatever answer the client gets.
   */
  begin(ctx: RequestContext, trust: TrustedProxies): void {
    const headers = ctx.headers;
    const idHeader = this.header;
    let id: string | undefined;
    let idCount = 0;
    let parent: string | undefined;
    let parentCount = 0;
    let state: string | undefined;
    for (let i = 0; i < headers.length; i += 2) {
      const name = headers[i];
      if (name === idHeader) {
        id = headers[i + 1];
        idCount++;
      } else if (name === 'traceparent') {
        parent = headers[i + 1];
        parentCount++;
      } else if (name === 'tracestate') {
        state = state === undefined ? headers[i + 1] : `${state},${headers[i + 1]}`;
      } else if (name === 'user-agent') {
        ctx.userAgent ??= headers[i + 1];
      }
    }

    if (this.idsOn) {
      if (idCount === 1 && isAcceptableRequestId(id!) && trust.isTrusted(ctx.peer)) {
        ctx.requestId = id!;
      } else {
        if (idCount > 0) ctx.removeRequestHeader(idHeader);
        ctx.requestId = nextRequestId();
        headers.push(idHeader, ctx.requestId);
      }
      ctx.addResponseHeader(idHeader, ctx.requestId);
      // A client (or support tool) reading the first of two would get an ID the access log does not have.
      ctx.hideResponseHeaders(this.hidden);
    }

    const incoming = parentCount === 1 ? parseTraceparent(parent!) : null;
    let trace: RequestTrace;
    if (incoming !== null) {
      const ids = randomHex(16);
      // Parent-based: the caller decided; without export nothing is recorded, its flag goes on.
      const sampled = (incoming.flags & SAMPLED) !== 0;
      trace = new RequestTrace(incoming.traceId, ids.slice(0, 16), ids.slice(16), incoming.parentId, sampled && this.spans !== null);
      if (parentCount > 0) ctx.removeRequestHeader('traceparent');
      headers.push('traceparent', formatTraceparent(trace.traceId, trace.upstreamSpanId, sampled));
      if (state !== undefined) {
        ctx.removeRequestHeader('tracestate');
        const passed = passTracestate(state);
        if (passed !== null) {
          headers.push('tracestate', passed);
          trace.traceState = passed;
        }
      }
    } else {
      const ids = randomHex(32);
      const traceId = ids.slice(0, 32);
      const sampled = this.ratio > 0 && (this.ratio >= 1 || parseInt(traceId.slice(24), 16) / TWO_POW_32 < this.ratio);
      trace = new RequestTrace(traceId, ids.slice(32, 48), ids.slice(48), '', sampled);
      // An invalid traceparent is replaced, and a tracestate without a valid one means nothing.
      if (parentCount > 0) ctx.removeRequestHeader('traceparent');
      if (state !== undefined) ctx.removeRequestHeader('tracestate');
      headers.push('traceparent', formatTraceparent(traceId, trace.upstreamSpanId, sampled));
    }
    ctx.trace = trace;
  }

  /** The middleware began deciding (sampled requests only record it). */
  middlewareStarted(ctx: RequestContext): void {
    const trace = ctx.trace;
    if (trace !== null && trace.sampled) trace.middlewareStartedAt = performance.now();
  }

  /** The middleware decided. */
  middlewareEnded(ctx: RequestContext): void {
    const trace = ctx.trace;
    if (trace !== null && trace.sampled && trace.middlewareEndedAt === 0) trace.middlewareEndedAt = performance.now();
  }

  /**
   * The request is over at `now` (performance.now()): the cache status the access log shows is
   * settled, and the spans of a sampled request are recorded. Runs before the listeners.
   */
  finish(ctx: RequestContext, now: number): void {
    const trace = ctx.trace;
    ctx.cache ??= headerValue(ctx.responseHeaders, 'x-cache');
    const upstreamStarted = ctx.upstreamStartedAt;
    const upstreamEnded = ctx.upstreamEndedAt > 0 ? ctx.upstreamEndedAt : now;
    if (trace === null || !trace.sampled || this.spans === null) return;
    try {
      this.spans.record({
        trace,
        method: ctx.method,
        path: ctx.path,
        query: ctx.query,
        routeTemplate: ctx.routeTemplate,
        status: ctx.status,
        startedAt: TIME_ORIGIN + ctx.startedAt,
        endedAt: TIME_ORIGIN + now,
        middlewareStartedAt: trace.middlewareStartedAt > 0 ? TIME_ORIGIN + trace.middlewareStartedAt : 0,
        middlewareEndedAt: trace.middlewareEndedAt > 0 ? TIME_ORIGIN + trace.middlewareEndedAt : 0,
        upstream: ctx.upstream,
        upstreamMethod: ctx.headAsGet ? 'GET' : ctx.method,
        upstreamTarget: ctx.query === '' ? ctx.path : `${ctx.path}?${ctx.query}`,
        upstreamStartedAt: upstreamStarted > 0 ? TIME_ORIGIN + upstreamStarted : 0,
        upstreamEndedAt: TIME_ORIGIN + upstreamEnded,
        upstreamStatus: ctx.upstreamStatus,
        upstreamError: ctx.upstreamError,
        secure: ctx.secure,
        clientAddress: ctx.clientAddress,
        userAgent: ctx.userAgent,
        requestId: ctx.requestId,
        host: ctx.host,
        bytesIn: ctx.bytesIn,
        bytesOut: ctx.bytesOut,
        cut: ctx.cut,
      });
    } catch (err) {
      this.warn(`could not record the spans of a request: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  /** Exports the spans queued so far (bounded by the export timeout). */
  async flush(): Promise<void> {
    await this.spans?.flush();
  }

  async close(): Promise<void> {
    await this.spans?.close();
  }
}

/** The first value of `name` in a flat [name, value, ...] list, or null. */
export function headerValue(headers: readonly string[] | null, name: string): string | null {
  if (headers === null) return null;
  for (let i = 0; i < headers.length; i += 2) if (headers[i] === name) return headers[i + 1]!;
  return null;
}

/**
 * The same trace with ids that do not pin randomHex's pool string (see ownedId), for a context kept
 * long after its request: an open WebSocket connection's, for its access-log line at the end.
 */
export function ownedTrace(trace: RequestTrace): RequestTrace {
  const owned = new RequestTrace(ownedId(trace.traceId), ownedId(trace.spanId), ownedId(trace.upstreamSpanId), trace.parentId, trace.sampled);
  owned.traceState = trace.traceState;
  owned.middlewareStartedAt = trace.middlewareStartedAt;
  owned.middlewareEndedAt = trace.middlewareEndedAt;
  return owned;
}
