/**
 * What the stages of one request share: the data plane fills it as it reads, routes and forwards the
 * request; middleware reads it and writes its decisions into it (the consumer, headers for the upstream
 * and for the client); the exchange records the outcome; listeners read it when the request is done.
 * One object per request, created when the request arrives.
 */
import type { Route, RouteTarget } from '../routing/table.js';
import type { ContentAnswer } from '../middleware/types.js';
import type { Capture } from '../listeners/capture.js';
import type { RequestTrace } from '../observe/request-trace.js';

/**
 * Watches the upstream's answer on its way to the client (a middleware's response side, e.g. the
 * response cache storing it). Observers are called in the reverse order of their registration.
 */
export interface ResponseObserver {
  /** The upstream's status and end-to-end headers (flat, names lower-case), before the client gets them. */
  onHead(status: number, headers: readonly string[]): void;
  /** A body chunk, before the client gets it; valid only during the call unless copied. */
  onData(chunk: Uint8Array): void;
  /** The answer reached the client whole. */
  onEnd(): void;
  /** It did not: the upstream broke off, the client left, or the gateway answered instead. */
  onAbort(): void;
  /**
   * The upstream failed (no answer, or a 5xx) and nothing has reached the client yet: content to send
   * instead (stale-if-error), or null.
   */
  substitute(status: number): ContentAnswer | null;
}

const NONE: readonly RouteTarget[] = Object.freeze([]);
const NO_IDS: readonly string[] = Object.freeze([]);

export class RequestContext {
  /** The method the client sent. */
  readonly method: string;
  /** The normalized path once normalized (the raw URL path before that, or when it could not be). */
  path: string;
  /** The raw query string, without "?", as forwarded (apiKeyAuth with hideCredentials may take its key out). */
  query: string;
  /** The connection's peer address. */
  readonly peer: string;
  /** The client's X-Forwarded-For (combined), read only when the peer is a trusted proxy. */
  readonly forwardedFor: string | undefined;
  /** performance.now() when the request arrived. */
  readonly startedAt: number;
  /** A request body follows the head. */
  readonly hasBody: boolean;
  /** Its declared Content-Length; -1 when none (no body, or sent chunked). */
  bodyLength = -1;

  /** The selected endpoint group; null until routed (and for built-ins and rejections). */
  route: Route | null = null;
  /** Its hosts left after content negotiation: where the balancer (and a retry) may send it. */
  targets: readonly RouteTarget[] = NONE;
  /** Served by the endpoint's GET (a HEAD with no HEAD endpoint): the upstream gets GET. */
  headAsGet = false;
  /** The host the request went to last; null while not forwarded. */
  upstream: string | null = null;
  /** The endpoint's x-disabled-listeners. */
  disabledListeners: readonly string[] = NO_IDS;
  /** x-disabled-middleware of every target of the route (a middleware any of them disables is off). */
  disabledMiddleware: readonly string[] = NO_IDS;

  /** End-to-end request headers for the upstream, flat [name, value, ...], names lower-case. */
  headers: string[];
  /** Who apiKeyAuth admitted; null when no key was checked. */
  consumer: string | null = null;
  /** Headers middleware adds to whatever answer the client gets, flat [name, value, ...]; null when none. */
  responseHeaders: string[] | null = null;
  /** Middleware watching the upstream's answer; null when none (the usual case). */
  observers: ResponseObserver[] | null = null;
  /** Kept for listeners that sampled this request (shadow traffic); null when none did. */
  capture: Capture | null = null;

  /** Status sent to the client (499: the client left before any response). */
  status = 0;
  /** Request body bytes received. */
  bytesIn = 0;
  /** Response body bytes sent (not counting the head). */
  bytesOut = 0;
  /** The client's address as decided by trustedProxies (see src/http/trusted-proxies.ts). */
  clientAddress = '';

  // Observability (src/observe/request-observe.ts).
  /** The request ID (kept from a trusted peer or made here); '' when request IDs are off. */
  requestId = '';
  /** The client's User-Agent. */
  userAgent: string | undefined = undefined;
  /** Its trace (ids, and the timestamps of a sampled one); null before the head was read. */
  trace: RequestTrace | null = null;
  /** performance.now() when the upstream call was first sent and when it ended; 0 until then. */
  upstreamStartedAt = 0;
  upstreamEndedAt = 0;
  /** X-Cache of an answer the gateway served from its cache (HIT, STALE); null otherwise. */
  cache: string | null = null;

  constructor(method: string, path: string, query: string, peer: string, forwardedFor: string | undefined, startedAt: number, hasBody: boolean, headers: string[]) {
    this.method = method;
    this.path = path;
    this.query = query;
    this.peer = peer;
    this.forwardedFor = forwardedFor;
    this.startedAt = startedAt;
    this.hasBody = hasBody;
    this.headers = headers;
  }

  /** The first value of a request header the upstream would get (lower-case name); undefined when absent. */
  requestHeader(name: string): string | undefined {
    const headers = this.headers;
    for (let i = 0; i < headers.length; i += 2) if (headers[i] === name) return headers[i + 1];
    return undefined;
  }

  /** Removes every request header of that (lower-case) name before forwarding. */
  removeRequestHeader(name: string): void {
    const headers = this.headers;
    let to = 0;
    for (let from = 0; from < headers.length; from += 2) {
      if (headers[from] === name) continue;
      headers[to++] = headers[from];
      headers[to++] = headers[from + 1];
    }
    // Setting length is a runtime call even when nothing was removed (the usual case).
    if (to !== headers.length) headers.length = to;
  }

  addResponseHeader(name: string, value: string): void {
    (this.responseHeaders ??= []).push(name, value);
  }

  observe(observer: ResponseObserver): void {
    (this.observers ??= []).push(observer);
  }

  /** The selected endpoint's template (as first declared), or null. */
  get routeTemplate(): string | null {
    return this.route === null ? null : this.route.template;
  }

  get routeId(): number {
    return this.route === null ? -1 : this.route.id;
  }
}
