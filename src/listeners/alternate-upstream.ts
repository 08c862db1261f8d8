/**
 * alternateUpstream (docs/reference/listeners.md#alternateupstream): shadow traffic. A sampled share of the requests of the listed
 * methods is sent again, after the client's answer completed, to another service (a rewrite being
 * rolled out); its answer is compared with the one the client got, the outcome counted under
 * `listeners.<id>.` and every mismatch written as one JSON line to the mismatch log.
 *
 * The client never waits for any of it: the data plane calls done() once the client's answer is over,
 * and the copy leaves on a later turn of the event loop. What the listener holds is bounded by
 * maxInFlight: sample() reserves a slot (or counts the request dropped) before anything is captured,
 * and the slot is given back when the comparison is over or the request turns out not to be sent.
 *
 * What the alternate gets: the method, normalized path, raw query, end-to-end headers and body the
 * primary upstream got (X-Forwarded-*, Via and headers middleware added included, credentials a
 * middleware hid left out), with the alternate's own Host. A HEAD the primary got as a GET (no HEAD
 * endpoint) goes to the alternate as a GET too, and only status and headers are compared.
 */
import { resolve as resolvePath } from 'node:path';
// undici is loaded when a shadow listener is configured (about 0.3-0.9 s of CPU at start), not by every worker.
import type { Dispatcher, Pool } from 'undici';
import type { RequestContext } from '../exchange/context.js';
import { normalizeServiceLocation } from '../config/service-location.js';
import { openAppendLog, type AppendLog } from './append-log.js';
import type { Capture } from '../exchange/capture.js';
import { mismatchLine, type BodyReport, type MismatchRecord } from './mismatch-line.js';
import { Sampler } from './sampler.js';
import { bodyDifference } from './shadow-body.js';
import { headerDifferences, headerMapFromFlat, headerMapFromParsed, shadowRequestHeaders } from './shadow-headers.js';
import type { Listener, ListenerContext, ListenerMetrics } from './types.js';
import { counterPart } from '../metrics/counters.js';
import { timerDelay, timerDuration } from '../config/durations.js';
import { appendPathProblem } from '../config/append-path.js';
import type { EntryProblem } from '../config/typed-list-schema.js';

export interface AlternateUpstreamConfig {
  id: string;
  type: 'alternateUpstream';
  /** `http(s)://host:port` of the alternate service. */
  serviceLocation: string;
  /** Share of the requests of the listed methods that is sent, 0..1. */
  sample: number;
  methods: string[];
  /** Largest request body sent, and largest answer body compared (either side). */
  maxBodyBytes: number;
  /** Longest a shadow request may take, from sending to the last byte of its answer. */
  timeoutMs: number;
  /** Most sampled requests held at once (from routing until their comparison is over). */
  maxInFlight: number;
  /** Response headers left out of the comparison (any case). */
  ignoreHeaders: string[];
  /** File the mismatches are appended to (relative: to the working directory); null: none kept. */
  mismatchLog: string | null;
}

export const ALTERNATE_UPSTREAM_DEFAULTS = {
  sample: 0.1,
  methods: ['GET', 'HEAD'],
  maxBodyBytes: 1024 * 1024,
  timeoutMs: 5000,
  maxInFlight: 64,
  ignoreHeaders: ['date', 'server'],
  mismatchLog: 'shadow-mismatches.jsonl',
} as const;

const TOKEN = "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$";

export const alternateUpstreamSchema = {
  description:
    'Shadow traffic: a sampled share of requests is sent again to another service after the ' +
    "client's answer, and the two answers are compared. Never delays or changes the client's answer.",
  required: ['serviceLocation'],
  properties: {
    serviceLocation: {
      type: 'string',
      minLength: 1,
      description:
        'Where the alternate service listens: "http://host:port" or "https://host:port", checked and normalized ' +
        'like an upstream\'s serviceLocation (no user info, path, query or fragment). It need not be an upstream.',
    },
    sample: {
      type: 'number',
      minimum: 0,
      maximum: 1,
      default: ALTERNATE_UPSTREAM_DEFAULTS.sample,
      description:
        'Share of the routed requests of the listed methods that is sent to the alternate (0: none, 1: all), ' +
        'decided per request in each worker.',
    },
    methods: {
      type: 'array',
      minItems: 1,
      uniqueItems: true,
      items: { type: 'string', pattern: TOKEN },
      default: ALTERNATE_UPSTREAM_DEFAULTS.methods,
      description:
        'Methods whose requests may be sent (any case; upper-cased). Others never are: list POST, PUT, PATCH or ' +
        'DELETE only when the alternate cannot cause side effects twice.',
    },
    maxBodyBytes: {
      type: 'integer',
      minimum: 0,
      default: ALTERNATE_UPSTREAM_DEFAULTS.maxBodyBytes,
      description:
        "Largest request body sent, and largest answer body compared: a request whose body or whose client's " +
        "answer body is larger is not sent (counted dropped); an alternate's body larger is a mismatch (tooLarge). " +
        'Bodies are held in memory while sampled, so this times maxInFlight bounds what shadowing holds.',
    },
    timeoutMs: timerDuration(
      'Longest a shadow request may take, connecting through the last byte of its answer; past it, it counts as an error.',
      ALTERNATE_UPSTREAM_DEFAULTS.timeoutMs,
    ),
    maxInFlight: {
      type: 'integer',
      minimum: 1,
      maximum: 100000,
      default: ALTERNATE_UPSTREAM_DEFAULTS.maxInFlight,
      description:
        'Most sampled requests a worker holds at once, from routing until their comparison is over (also the ' +
        "connection limit to the alternate); a sampled request over it is not sent (counted dropped).",
    },
    ignoreHeaders: {
      type: 'array',
      uniqueItems: true,
      items: { type: 'string', pattern: TOKEN },
      default: ALTERNATE_UPSTREAM_DEFAULTS.ignoreHeaders,
      description:
        'Response headers left out of the comparison (any case), besides those never compared: hop-by-hop ' +
        'headers, Content-Length, Date and Via.',
    },
    mismatchLog: {
      type: ['string', 'null'],
      minLength: 1,
      default: ALTERNATE_UPSTREAM_DEFAULTS.mismatchLog,
      description:
        "File each mismatch is appended to as one JSON line of at most 4 KiB (a relative path resolves against the " +
        "gateway's working directory); every worker appends to it. null: count mismatches without logging them.",
    },
  },
} as const;

/** Request headers copied into a mismatch line: enough to replay the request, never a credential. */
const LOGGED_REQUEST_HEADERS: readonly string[] = ['content-type', 'accept', 'accept-encoding', 'accept-language', 'user-agent', 'x-request-id'];
/** A listener that keeps failing says so in the log at most this often. */
const WARN_EVERY_MS = 60_000;
/** Decompressed bodies may grow to this many times maxBodyBytes before the raw bytes are compared instead. */
const DECODED_BODY_FACTOR = 4;

class ShadowTimeout extends Error {
  readonly code = 'SPECGATE_SHADOW_TIMEOUT';
}

interface CounterNames {
  sent: string;
  matched: string;
  mismatched: string;
  errors: string;
  dropped: string;
  skipped: string;
  logDropped: string;
}

/** The alternate's answer, as far as it was read. */
interface AlternateAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** null when it was not read (HEAD, or a GET serving a HEAD) or was larger than maxBodyBytes. */
  body: Buffer | null;
  tooLarge: boolean;
}

class AlternateUpstream implements Listener {
  readonly type = 'alternateUpstream';
  readonly id: string;
  /** The capture keeps no more of either body than this (a larger one is marked truncated, and dropped here). */
  readonly maxCaptureBytes: number;
  private readonly origin: string;
  private readonly methods: ReadonlySet<string>;
  private readonly ignore: ReadonlySet<string>;
  private readonly sampler: Sampler;
  private readonly maxBodyBytes: number;
  private readonly timeoutMs: number;
  private readonly maxInFlight: number;
  /** undici's pool to the alternate upstream, made once undici is loaded. */
  private readonly pool: Promise<Pool>;
  private readonly log: AppendLog | null;
  private readonly metrics: ListenerMetrics;
  private readonly warn: ListenerContext['warn'];
  private readonly names: CounterNames;
  private readonly readiness: Promise<void>;

  /** Sampled requests not yet given back (captured, being sent, or being compared). */
  private inFlight = 0;
  private closed = false;
  private closing: Promise<void> | null = null;
  private onIdle: (() => void) | null = null;
  private lastWarnAt = -Infinity;
  private errorsSinceWarn = 0;

  constructor(config: AlternateUpstreamConfig, context: ListenerContext) {
    this.id = config.id;
    const checked = normalizeServiceLocation(config.serviceLocation);
    if ('reason' in checked) throw new Error(`listener "${config.id}": serviceLocation ${checked.reason}`);
    this.origin = checked.origin;
    this.methods = new Set(config.methods.map((method) => method.toUpperCase()));
    this.ignore = new Set(config.ignoreHeaders.map((name) => name.toLowerCase()));
    this.sampler = new Sampler(config.sample, context.seed);
    this.maxBodyBytes = config.maxBodyBytes;
    this.maxCaptureBytes = config.maxBodyBytes;
    this.timeoutMs = config.timeoutMs;
    this.maxInFlight = config.maxInFlight;
    this.metrics = context.metrics;
    this.warn = context.warn;
    const prefix = `listeners.${counterPart(config.id)}.`;
    this.names = {
      sent: `${prefix}sent`,
      matched: `${prefix}matched`,
      mismatched: `${prefix}mismatched`,
      errors: `${prefix}errors`,
      dropped: `${prefix}dropped`,
      skipped: `${prefix}skipped`,
      logDropped: `${prefix}mismatchLogDropped`,
    };
    this.pool = import('undici').then(({ Pool }) => new Pool(this.origin, { connections: config.maxInFlight, pipelining: 1, connect: { timeout: config.timeoutMs } }));
    const pooled = this.pool.then(() => undefined);
    if (config.mismatchLog === null) {
      this.log = null;
      this.readiness = pooled;
    } else {
      const path = resolvePath(context.cwd ?? process.cwd(), config.mismatchLog);
      this.log = openAppendLog(
        path,
        (err) =>
          this.warn(`listener "${this.id}": writing the mismatch log failed (${err.code ?? err.message}); mismatches are only counted until it works again`, {
            listener: this.id,
            path,
          }),
        () => this.warn(`listener "${this.id}": writing the mismatch log works again`, { listener: this.id, path }),
      );
      this.readiness = Promise.all([
        pooled,
        this.log.ready.catch((err: Error) => {
          throw new Error(`listener "${this.id}": mismatchLog: ${err.message}`);
        }),
      ]).then(() => undefined);
      this.readiness.catch(() => {});
    }
  }

  // ---- RequestListener (called by the data plane) ---------------------------------------------

  sample(ctx: RequestContext): boolean {
    if (!this.methods.has(ctx.method) || this.closed || !this.sampler.take()) return false;
    if (this.inFlight >= this.maxInFlight || (ctx.hasBody && this.declaredBodyTooLarge(ctx))) {
      this.metrics.add(this.names.dropped);
      return false;
    }
    this.inFlight++;
    return true;
  }

  done(ctx: RequestContext, capture: Capture): void {
    if (this.closed || !capture.complete) {
      // The gateway answered itself, the upstream broke off or the client left: nothing to compare.
      this.metrics.add(this.names.skipped);
      this.release();
      return;
    }
    if (capture.requestTruncated || capture.requestBytes > this.maxBodyBytes || capture.responseTruncated || capture.responseBytes > this.maxBodyBytes) {
      this.metrics.add(this.names.dropped);
      this.release();
      return;
    }
    // The client's answer may still sit in a corked uWS buffer: the copy leaves on a later turn.
    setImmediate(runShadow, this, ctx, capture);
  }

  // ---- Listener ---------------------------------------------------------------------------------

  ready(): Promise<void> {
    return this.readiness;
  }

  close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  reopen(): Promise<void> {
    return this.log?.reopen() ?? Promise.resolve();
  }

  private async shutDown(): Promise<void> {
    this.closed = true;
    if (this.inFlight > 0) {
      // Running comparisons end within timeoutMs; sampled requests still being answered are skipped.
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, timerDelay(this.timeoutMs + 1000));
        this.onIdle = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.onIdle = null;
    }
    await (await this.pool).destroy().catch(() => {});
    await this.log?.close();
  }

  // ---- one shadow request -------------------------------------------------------------------------

  async send(ctx: RequestContext, capture: Capture): Promise<void> {
    this.metrics.add(this.names.sent);
    try {
      const answer = await this.fetch(ctx, capture);
      const record = await this.compare(ctx, capture, answer);
      if (record === null) {
        this.metrics.add(this.names.matched);
      } else {
        this.metrics.add(this.names.mismatched);
        if (this.log !== null && !this.log.append(mismatchLine(record))) this.metrics.add(this.names.logDropped);
      }
    } catch (err) {
      this.metrics.add(this.names.errors);
      this.warnAboutError(err);
    } finally {
      this.release();
    }
  }

  private async fetch(ctx: RequestContext, capture: Capture): Promise<AlternateAnswer> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(new ShadowTimeout(`no complete answer within ${this.timeoutMs} ms`)), this.timeoutMs);
    try {
      const body = capture.requestBytes === 0 ? null : capture.requestBody.length === 1 ? capture.requestBody[0] : Buffer.concat(capture.requestBody);
      const options: Dispatcher.RequestOptions = {
        path: ctx.query === '' ? ctx.path : `${ctx.path}?${ctx.query}`,
        method: ctx.headAsGet ? 'GET' : (ctx.method as Dispatcher.HttpMethod),
        headers: shadowRequestHeaders(ctx.headers),
        body,
        signal: controller.signal,
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
      };
      const response = await (await this.pool).request(options);
      const answer: AlternateAnswer = { status: response.statusCode, headers: response.headers, body: null, tooLarge: false };
      if (ctx.method === 'HEAD') {
        await response.body.dump();
        return answer;
      }
      const chunks: Buffer[] = [];
      let bytes = 0;
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        bytes += chunk.length;
        if (bytes > this.maxBodyBytes) {
          answer.tooLarge = true;
          // Leaving the loop destroys the stream (and the connection with it).
          break;
        }
        chunks.push(chunk);
      }
      if (!answer.tooLarge) answer.body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, bytes);
      return answer;
    } catch (err) {
      // undici rejects with the abort reason, or with its own error when the signal's reason is lost.
      throw controller.signal.aborted && controller.signal.reason instanceof ShadowTimeout ? controller.signal.reason : err;
    } finally {
      clearTimeout(timer);
    }
  }

  /** null when the answers match; otherwise what a mismatch line says. */
  private async compare(ctx: RequestContext, capture: Capture, answer: AlternateAnswer): Promise<MismatchRecord | null> {
    const headers = headerDifferences(headerMapFromFlat(capture.headers, this.ignore), headerMapFromParsed(answer.headers, this.ignore));
    let body: BodyReport | null = null;
    if (ctx.method !== 'HEAD') {
      if (answer.tooLarge) {
        const length = Number(firstParsed(answer.headers, 'content-length'));
        body = { kind: 'tooLarge', alternateBytes: Number.isSafeInteger(length) ? length : null, limit: this.maxBodyBytes };
      } else {
        const clientBody = capture.responseBody.length === 1 ? capture.responseBody[0]! : Buffer.concat(capture.responseBody);
        body = await bodyDifference(
          { bytes: clientBody, contentType: firstFlat(capture.headers, 'content-type'), contentEncoding: firstFlat(capture.headers, 'content-encoding') },
          { bytes: answer.body!, contentType: firstParsed(answer.headers, 'content-type'), contentEncoding: firstParsed(answer.headers, 'content-encoding') },
          this.maxBodyBytes * DECODED_BODY_FACTOR,
        );
      }
    }
    if (capture.status === answer.status && headers.length === 0 && body === null) return null;
    const requestHeaders: Array<[string, string]> = [];
    for (const name of LOGGED_REQUEST_HEADERS) {
      const value = ctx.requestHeader(name);
      if (value !== undefined) requestHeaders.push([name, value]);
    }
    return {
      time: Date.now(),
      listener: this.id,
      alternate: this.origin,
      method: ctx.method,
      sentMethod: ctx.headAsGet ? 'GET' : null,
      path: ctx.path,
      query: ctx.query,
      endpoint: ctx.route === null ? null : `${ctx.route.method} ${ctx.route.template}`,
      upstream: ctx.upstream,
      consumer: ctx.consumer,
      requestId: ctx.requestId,
      traceId: ctx.trace === null ? '' : ctx.trace.traceId,
      requestHeaders,
      clientStatus: capture.status,
      alternateStatus: answer.status,
      headers,
      body,
    };
  }

  // ---- bookkeeping --------------------------------------------------------------------------------

  private release(): void {
    this.inFlight--;
    if (this.inFlight === 0) this.onIdle?.();
  }

  /** A Content-Length over maxBodyBytes: known before anything is captured. */
  private declaredBodyTooLarge(ctx: RequestContext): boolean {
    const length = ctx.requestHeader('content-length');
    return length !== undefined && Number(length) > this.maxBodyBytes;
  }

  private warnAboutError(err: unknown): void {
    this.errorsSinceWarn++;
    const now = performance.now();
    if (now - this.lastWarnAt < WARN_EVERY_MS) return;
    this.lastWarnAt = now;
    const errors = this.errorsSinceWarn;
    this.errorsSinceWarn = 0;
    const reason = errorText(err);
    this.warn(`listener "${this.id}": shadow requests to ${this.origin} fail (${reason}); ${errors} failed since the last warning`, {
      listener: this.id,
      alternate: this.origin,
      errors,
    });
  }
}

/** setImmediate target (no closure per shadow request). */
function runShadow(listener: AlternateUpstream, ctx: RequestContext, capture: Capture): void {
  void listener.send(ctx, capture);
}

function errorText(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as NodeJS.ErrnoException).code;
  return code === undefined || err.message.includes(code) ? err.message : `${err.message} (${code})`;
}

function firstFlat(flat: readonly string[], name: string): string | undefined {
  for (let i = 0; i < flat.length; i += 2) if (flat[i] === name) return flat[i + 1];
  return undefined;
}

function firstParsed(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Rules beyond the schema: serviceLocation as an upstream's. */
export function alternateUpstreamProblems(config: AlternateUpstreamConfig): EntryProblem[] {
  const checked = normalizeServiceLocation(config.serviceLocation);
  return 'reason' in checked ? [{ key: 'serviceLocation', reason: checked.reason }] : [];
}

/** The mismatch log's directory must exist (relative paths: from the working directory). */
export function alternateUpstreamFileProblems(config: AlternateUpstreamConfig): EntryProblem[] {
  if (config.mismatchLog === null) return [];
  const reason = appendPathProblem(resolvePath(config.mismatchLog));
  return reason === null ? [] : [{ key: 'mismatchLog', reason }];
}

export function createAlternateUpstream(config: AlternateUpstreamConfig, context: ListenerContext): Listener {
  return new AlternateUpstream(config, context);
}
