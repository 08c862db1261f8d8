/**
 * Span export over OTLP/HTTP with OpenTelemetry's SDK (config `tracing`). Spans are built after the
 * request is over from the timestamps it recorded (see RequestTrace), only for sampled requests: an
 * unsampled one costs nothing here. Each sampled request gives
 * - a SERVER span named "<METHOD> <route template>" (or "<METHOD>" when no endpoint matched), with the
 *   HTTP semantic-convention attributes, its parent the caller's span when a traceparent came in;
 * - an INTERNAL span "middleware" for the time the middleware took to decide, when any ran;
 * - a CLIENT span "<METHOD> upstream" for the call to the upstream, whose id is the parent id the
 *   upstream saw in its traceparent.
 *
 * The spans are written as the SDK's span processor and exporter read them (ReadableSpan), straight from
 * the request's timestamps, not opened and ended through a Tracer: a Tracer's span is made for code that
 * is still running (clock reads, context, attribute checks, the SDK's own span metrics). Recording a
 * sampled request (3 spans; a `node` loop of 2,000 requests, 5 rounds) took 16-56 µs through a Tracer
 * and 3-24 µs written directly. The export's JSON (about 12 µs a span) is the SDK exporter's, as before.
 *
 * Spans queue in a BatchSpanProcessor and go out in batches from the event loop's idle time. The queue
 * is bounded (spans waiting plus spans being exported); past the bound a span is dropped and counted,
 * as is every span of a failed export (collector down, refusing, timing out). Nothing waits for the
 * collector: a request never does.
 */
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import { SpanKind, SpanStatusCode, TraceFlags, type Attributes, type HrTime, type Link, type SpanContext, type SpanStatus, type TraceState } from '@opentelemetry/api';
import { ExportResultCode, SDK_INFO, hrTimeDuration, type ExportResult, type InstrumentationScope } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor, type ReadableSpan, type SpanExporter, type TimedEvent } from '@opentelemetry/sdk-trace-base';
import {
  ATTR_CLIENT_ADDRESS,
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_NETWORK_PROTOCOL_VERSION,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_SERVICE_NAME,
  ATTR_SERVICE_VERSION,
  ATTR_URL_FULL,
  ATTR_URL_PATH,
  ATTR_URL_QUERY,
  ATTR_URL_SCHEME,
  ATTR_USER_AGENT_ORIGINAL,
} from '@opentelemetry/semantic-conventions';
import { buildInfo } from '../builtins/build-info.js';
import type { RequestTrace } from '../exchange/request-trace.js';
import { ownedId, randomHex } from './random-hex.js';

export interface TracingConfig {
  /** OTLP/HTTP traces endpoint, e.g. http://127.0.0.1:4318/v1/traces. */
  otlpEndpoint: string;
  /** Share of traces the gateway starts that are exported (0-1); a caller's sampled flag decides for the rest. */
  sampleRatio: number;
  serviceName: string;
}

/** Where the export counts what it did (worker counters, shown under tracing.* in /metrics). */
export interface TracingCounters {
  add(name: string, n?: number): void;
}

export const SPANS_EXPORTED = 'tracing.spansExported';
export const SPANS_DROPPED = 'tracing.spansDropped';

/** Bounds of the export queue and batches (tests make them small). */
export interface ExportLimits {
  maxQueueSize: number;
  maxExportBatchSize: number;
  scheduledDelayMillis: number;
  exportTimeoutMillis: number;
}

/**
 * The longest a string attribute taken from the request is (url.path, url.query, url.full,
 * user_agent.original); a longer one is cut there, as OpenTelemetry's attributeValueLengthLimit cuts.
 * The export serializes a batch on the worker's event loop: a client sending 7 KB User-Agents and
 * queries with sampled traceparents made 512-span batches of 5.9 MB, 125-155 ms of serializing each,
 * during which requests waited. The access log keeps the whole values.
 */
export const MAX_ATTRIBUTE_CHARS = 256;

function capped(value: string): string {
  return value.length > MAX_ATTRIBUTE_CHARS ? value.slice(0, MAX_ATTRIBUTE_CHARS) : value;
}

/**
 * The caller's tracestate exactly as it was passed upstream. OpenTelemetry's TraceState class keeps at
 * most 512 characters (dropping members past it), where the gateway passes up to 8192 on: the
 * exported spans would then carry another tracestate than the upstream saw. Spans only serialize it.
 */
class PassedTraceState implements TraceState {
  constructor(private readonly text: string) {}
  set(): TraceState {
    return this;
  }
  unset(): TraceState {
    return this;
  }
  get(key: string): string | undefined {
    for (const member of this.text.split(',')) {
      const equals = member.indexOf('=');
      if (equals > 0 && member.slice(0, equals).trim() === key) return member.slice(equals + 1).trim();
    }
    return undefined;
  }
  serialize(): string {
    return this.text;
  }
}

const DEFAULT_LIMITS: ExportLimits = { maxQueueSize: 4096, maxExportBatchSize: 512, scheduledDelayMillis: 1000, exportTimeoutMillis: 5000 };

/** A finished request, as its spans need it. Times are epoch milliseconds (fractional); 0 for "did not happen". */
export interface TracedRequest {
  trace: RequestTrace;
  method: string;
  path: string;
  /** The raw query without `?` as the access log has it (an apiKeyAuth key hidden); '' when none. */
  query: string;
  routeTemplate: string | null;
  status: number;
  startedAt: number;
  endedAt: number;
  middlewareStartedAt: number;
  middlewareEndedAt: number;
  upstream: string | null;
  upstreamMethod: string;
  upstreamTarget: string;
  upstreamStartedAt: number;
  upstreamEndedAt: number;
  /** The upstream's answer status; 0 when none came. */
  upstreamStatus: number;
  /** Why the upstream call failed (e.g. `connect_refused`); null when it did not. */
  upstreamError: string | null;
  /** The request came over TLS. */
  secure: boolean;
  clientAddress: string;
  userAgent: string | undefined;
  requestId: string;
  host: string | undefined;
  bytesIn: number;
  bytesOut: number;
  /** The answer's head went out but its body did not reach the client whole (the access log's `cut`). */
  cut: boolean;
}

/** Exports that may wait for the collector at once; one more fails at once. */
const LANES = 2;

/**
 * One export at a time, through an OTLP exporter with an http agent of its own: when an export
 * outlives its deadline, destroying that agent's sockets ends just that export's request.
 */
interface Lane {
  exporter: OTLPTraceExporter;
  agent: HttpAgent;
  busy: boolean;
}

function openLane(url: string, timeoutMillis: number): Lane {
  const agent = url.startsWith('https:') ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true });
  // The lane's busy flag keeps it to one export. The exporter's own limit counts an export until a
  // moment after its callback, when the next export may already have been handed to the lane.
  return { exporter: new OTLPTraceExporter({ url, timeoutMillis, concurrencyLimit: 2, httpAgentOptions: () => agent }), agent, busy: false };
}

/**
 * The OTLP exporter's error after it retried an answer of 429, 502, 503 or 504 until its deadline: the
 * only failure it reports without the status (otlp-exporter-base's export delegate; network errors and
 * timeouts keep their own error).
 */
const RETRIES_SPENT = 'Export failed with retryable status';

/** Why an export failed, for the warning. */
function describe(error: Error | undefined): string {
  if (error === undefined) return 'unknown error';
  if (error.message === RETRIES_SPENT) return 'the collector answered 429, 502, 503 or 504 to every try until the export deadline';
  const status = (error as { code?: unknown }).code;
  return typeof status === 'number' ? `the collector answered ${status} ${error.message}` : error.message;
}

/**
 * Counts what becomes of every span and keeps the number in the processor's hands bounded: a span
 * is let in only while fewer than maxQueueSize are queued or being exported, so the processor's own
 * queue never overflows unseen. Every export is over by its deadline: the OTLP exporter's own
 * timeout is an idle timeout of the socket, which a collector sending a byte now and then never
 * reaches.
 */
class CountingExporter implements SpanExporter {
  /** Spans handed to the processor whose export has not finished. */
  pending = 0;
  private failing = false;
  private readonly lanes: Lane[] = [];

  constructor(
    private readonly url: string,
    private readonly deadlineMillis: number,
    private readonly counters: TracingCounters,
    private readonly warn: (message: string) => void,
    private readonly info: (message: string) => void,
  ) {
    for (let i = 0; i < LANES; i++) this.lanes.push(openLane(url, deadlineMillis));
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const settle = (result: ExportResult): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      this.pending -= spans.length;
      if (result.code === ExportResultCode.SUCCESS) {
        this.counters.add(SPANS_EXPORTED, spans.length);
        if (this.failing) this.info('span export works again');
        this.failing = false;
      } else {
        this.counters.add(SPANS_DROPPED, spans.length);
        if (!this.failing) this.warn(`span export failed (${describe(result.error)}); spans are dropped until it works again`);
        this.failing = true;
      }
      done(result);
    };
    const lane = this.lanes.find((l) => !l.busy);
    if (lane === undefined) {
      settle({ code: ExportResultCode.FAILED, error: new Error(`${LANES} exports are still waiting for the collector`) });
      return;
    }
    lane.busy = true;
    timer = setTimeout(() => {
      settle({ code: ExportResultCode.FAILED, error: new Error(`the collector at ${this.url} gave no complete answer within ${this.deadlineMillis} ms`) });
      // The request errors out, its exporter settles and the lane is free for the next export.
      lane.agent.destroy();
    }, this.deadlineMillis);
    try {
      lane.exporter.export(spans, (result) => {
        lane.busy = false;
        settle(result);
      });
    } catch (err) {
      lane.busy = false;
      settle({ code: ExportResultCode.FAILED, error: err instanceof Error ? err : new Error(String(err)) });
    }
  }

  async shutdown(): Promise<void> {
    await Promise.all(this.lanes.map((lane) => lane.exporter.shutdown()));
    for (const lane of this.lanes) lane.agent.destroy();
  }

  async forceFlush(): Promise<void> {
    await Promise.all(this.lanes.map((lane) => lane.exporter.forceFlush()));
  }
}

function hrTime(epochMs: number): HrTime {
  const seconds = Math.trunc(epochMs / 1000);
  return [seconds, Math.round((epochMs - seconds * 1000) * 1e6)];
}

const UNSET: SpanStatus = { code: SpanStatusCode.UNSET };
const FAILED: SpanStatus = { code: SpanStatusCode.ERROR };
const SCOPE: InstrumentationScope = { name: 'specgate' };
const NO_LINKS: Link[] = [];
const NO_EVENTS: TimedEvent[] = [];

/** A span of a finished request, as the span processor and the exporter read it. */
class FinishedSpan implements ReadableSpan {
  readonly links = NO_LINKS;
  readonly events = NO_EVENTS;
  readonly ended = true;
  readonly droppedAttributesCount = 0;
  readonly droppedEventsCount = 0;
  readonly droppedLinksCount = 0;
  readonly instrumentationScope = SCOPE;
  readonly duration: HrTime;
  private readonly context: SpanContext;

  constructor(
    readonly resource: Resource,
    readonly name: string,
    readonly kind: SpanKind,
    traceId: string,
    spanId: string,
    readonly parentSpanContext: SpanContext | undefined,
    readonly startTime: HrTime,
    readonly endTime: HrTime,
    readonly attributes: Attributes,
    readonly status: SpanStatus,
    traceState?: TraceState,
  ) {
    this.context = { traceId, spanId, traceFlags: TraceFlags.SAMPLED, traceState };
    this.duration = hrTimeDuration(startTime, endTime);
  }

  spanContext(): SpanContext {
    return this.context;
  }
}

export class SpanExport {
  private readonly resource: Resource;
  private readonly processor: BatchSpanProcessor;
  private readonly exporter: CountingExporter;
  private readonly maxQueueSize: number;

  constructor(
    config: TracingConfig,
    private readonly counters: TracingCounters,
    warn: (message: string) => void,
    limits: Partial<ExportLimits> = {},
    /** Where the recovery line goes (info, as the access log's); the failure goes to `warn`. */
    info: (message: string) => void = warn,
  ) {
    const bounds = { ...DEFAULT_LIMITS, ...limits };
    this.maxQueueSize = bounds.maxQueueSize;
    this.exporter = new CountingExporter(config.otlpEndpoint, bounds.exportTimeoutMillis, counters, warn, info);
    // Present in /metrics from the start (0), so that a rate or an alert over them is defined before the first span.
    counters.add(SPANS_EXPORTED, 0);
    counters.add(SPANS_DROPPED, 0);
    this.resource = resourceFromAttributes({ ...SDK_INFO, [ATTR_SERVICE_NAME]: config.serviceName, [ATTR_SERVICE_VERSION]: buildInfo().version });
    // The exporter settles every export by its deadline. The processor's own timeout would let the next
    // batch start while that export still holds its lane, so it is set to fire only after it.
    this.processor = new BatchSpanProcessor(this.exporter, { ...bounds, exportTimeoutMillis: bounds.exportTimeoutMillis + 1000 });
  }

  /** The spans of one finished, sampled request go into the export queue (or are dropped and counted). */
  record(request: TracedRequest): void {
    const trace = request.trace;
    const spans = 1 + (request.middlewareStartedAt > 0 ? 1 : 0) + (request.upstreamStartedAt > 0 ? 1 : 0);
    if (this.exporter.pending + spans > this.maxQueueSize) {
      this.counters.add(SPANS_DROPPED, spans);
      return;
    }
    this.exporter.pending += spans;
    const resource = this.resource;
    const processor = this.processor;
    const failed = request.status >= 500 || request.cut;
    const endedAt = hrTime(request.endedAt);
    // The caller's tracestate (as passed upstream) goes on every span of the trace, as a Tracer's children inherit it.
    const traceState = trace.traceState === '' ? undefined : new PassedTraceState(trace.traceState);
    // The queued spans keep these ids until the export: copies that do not pin randomHex's pool.
    const traceId = ownedId(trace.traceId);
    const spanId = ownedId(trace.spanId);
    const parent: SpanContext | undefined = trace.parentId === '' ? undefined : { traceId, spanId: trace.parentId, traceFlags: TraceFlags.SAMPLED, isRemote: true, traceState };
    const inServer: SpanContext = { traceId, spanId, traceFlags: TraceFlags.SAMPLED, isRemote: false, traceState };
    const name = request.routeTemplate === null ? request.method : `${request.method} ${request.routeTemplate}`;
    const attributes: Attributes = {
      [ATTR_HTTP_REQUEST_METHOD]: request.method,
      [ATTR_URL_PATH]: capped(request.path),
      [ATTR_URL_SCHEME]: request.secure ? 'https' : 'http',
      [ATTR_HTTP_RESPONSE_STATUS_CODE]: request.status,
      [ATTR_NETWORK_PROTOCOL_VERSION]: '1.1',
      [ATTR_CLIENT_ADDRESS]: request.clientAddress,
      'http.request.body.size': request.bytesIn,
      'http.response.body.size': request.bytesOut,
      'gateway.request_id': request.requestId,
    };
    if (request.query !== '') attributes[ATTR_URL_QUERY] = capped(request.query);
    if (request.routeTemplate !== null) attributes[ATTR_HTTP_ROUTE] = request.routeTemplate;
    if (request.userAgent !== undefined) attributes[ATTR_USER_AGENT_ORIGINAL] = capped(request.userAgent);
    if (request.host !== undefined) addServerOf(attributes, request.host, request.secure);
    // A server span's error.type is its 5xx status, as text (OpenTelemetry HTTP conventions); an answer
    // cut short failed whatever its status: why the upstream failed mid-body, else `response_cut`.
    if (request.cut) attributes[ATTR_ERROR_TYPE] = request.upstreamError ?? 'response_cut';
    else if (failed) attributes[ATTR_ERROR_TYPE] = String(request.status);

    // Children first, as a Tracer's spans end: the server span ends last.
    if (request.middlewareStartedAt > 0) {
      const ended = request.middlewareEndedAt > 0 ? hrTime(request.middlewareEndedAt) : endedAt;
      processor.onEnd(new FinishedSpan(resource, 'middleware', SpanKind.INTERNAL, traceId, randomSpanId(), inServer, hrTime(request.middlewareStartedAt), ended, {}, UNSET, traceState));
    }
    if (request.upstreamStartedAt > 0 && request.upstream !== null) {
      const clientAttributes: Attributes = {
        [ATTR_HTTP_REQUEST_METHOD]: request.upstreamMethod,
        [ATTR_URL_FULL]: capped(request.upstream + request.upstreamTarget),
        ...serverOf(request.upstream),
      };
      if (request.upstreamStatus > 0) clientAttributes[ATTR_HTTP_RESPONSE_STATUS_CODE] = request.upstreamStatus;
      // On a client span a 4xx is a failure too: the call did not get what it asked for.
      const errorType = request.upstreamError ?? (request.upstreamStatus >= 400 ? String(request.upstreamStatus) : null);
      if (errorType !== null) clientAttributes[ATTR_ERROR_TYPE] = errorType;
      const ended = request.upstreamEndedAt > 0 ? hrTime(request.upstreamEndedAt) : endedAt;
      processor.onEnd(
        new FinishedSpan(resource, `${request.upstreamMethod} upstream`, SpanKind.CLIENT, traceId, ownedId(trace.upstreamSpanId), inServer, hrTime(request.upstreamStartedAt), ended, clientAttributes, errorType !== null ? FAILED : UNSET, traceState),
      );
    }
    // A 5xx or a cut answer is the server's failure; a 4xx is the client's (left unset, as the conventions ask).
    processor.onEnd(new FinishedSpan(resource, name, SpanKind.SERVER, traceId, spanId, parent, hrTime(request.startedAt), endedAt, attributes, failed ? FAILED : UNSET, traceState));
  }

  /** Exports what is queued (bounded by the export timeout). */
  async flush(): Promise<void> {
    await this.processor.forceFlush().catch(() => {});
  }

  async close(): Promise<void> {
    await this.processor.shutdown().catch(() => {});
  }
}

function randomSpanId(): string {
  return ownedId(randomHex(8));
}

/**
 * server.address and server.port of the Host a client sent ("name", "name:port", "[v6]:port"); the
 * scheme's port when it names none. A Host the accept phase refused (400) may be anything: no port then.
 */
function addServerOf(attributes: Attributes, host: string, secure: boolean): void {
  const colon = host.lastIndexOf(':');
  const hasPort = colon > host.lastIndexOf(']');
  const name = hasPort ? host.slice(0, colon) : host;
  attributes[ATTR_SERVER_ADDRESS] = name.startsWith('[') && name.endsWith(']') ? name.slice(1, -1) : name;
  const port = hasPort ? host.slice(colon + 1) : secure ? '443' : '80';
  if (/^\d{1,5}$/.test(port)) attributes[ATTR_SERVER_PORT] = Number(port);
}

const serverCache = new Map<string, Attributes>();

/** server.address and server.port of an upstream's serviceLocation ("http://host:port"). */
function serverOf(upstream: string): Attributes {
  let attributes = serverCache.get(upstream);
  if (attributes === undefined) {
    attributes = {};
    try {
      const url = new URL(upstream);
      attributes[ATTR_SERVER_ADDRESS] = url.hostname;
      attributes[ATTR_SERVER_PORT] = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    } catch {
      // Not a URL: no server attributes.
    }
    if (serverCache.size < 1000) serverCache.set(upstream, attributes);
  }
  return attributes;
}
