/**
 * The one object a request carries through its lifecycle (src/lifecycle/request-lifecycle.ts): accept
 * fills it from the parsed head, route adds the endpoint and its hosts, middleware read it and write
 * their decisions into it (the consumer, headers for the upstream and for the client), forward records
 * the host and the outcome, and the done phase hands it to every listener.
 */
import type { Route, RouteTarget } from '../routing/table.js';
import type { Capture } from './capture.js';
import type { ClientSide } from './client.js';
import type { ResponseObserver } from './observer.js';
import type { RequestTrace } from './request-trace.js';
import { fieldValue } from '../http/header-list.js';

export type { ResponseObserver } from './observer.js';

/** What the accept phase read of a request's head (src/http/client-request-head.ts is one). */
export interface ParsedRequestHead {
  readonly method: string;
  /** The request path as sent (origin form). */
  readonly url: string;
  readonly query: string;
  /** The connection's peer address. */
  readonly peer: string;
  /** performance.now() when the request arrived. */
  readonly startedAt: number;
  readonly xForwardedFor: string | undefined;
  readonly hasBody: boolean;
  /** Declared Content-Length; -1 when none. */
  readonly contentLength: number;
  /** It arrived over TLS. */
  readonly secure: boolean;
  /** End-to-end headers to forward, flat [name, value, ...]; a fresh array per request. */
  readonly forward: string[];
  /** The client's Host header (it is not among `forward`: the upstream gets its own). */
  readonly view?: { readonly host: string | undefined };
  /** The client's Connection header lists "close", or the body comes chunked: the connection ends after the answer. */
  readonly closeRequested?: boolean;
  /** ... in the one form the server library closes for by itself (see RequestContext.libraryCloses). */
  readonly libraryCloses?: boolean;
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
  /** The client's Host header; undefined when it sent none. */
  readonly host: string | undefined;
  /** The client's X-Forwarded-For (combined), read only when the peer is a trusted proxy. */
  readonly forwardedFor: string | undefined;
  /** performance.now() when the request arrived. */
  readonly startedAt: number;
  /** A request body follows the head. */
  readonly hasBody: boolean;
  /** It arrived over TLS. */
  readonly secure: boolean;
  /**
   * The client sent `Connection: close` (RFC 9112 9.6), or a chunked body (src/http/client-request-head.ts):
   * every answer says so, and the connection ends after it.
   */
  readonly closeRequested: boolean;
  /** In the form uWS closes for by itself, writing no Connection header (src/http/client-request-head.ts). */
  readonly libraryCloses: boolean;
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
  /** performance.now() when the request was handed to the upstream client (the last try). */
  upstreamSentAt = 0;
  /**
   * Milliseconds from upstreamSentAt until the last try's answer ended, failed, or was given up (the
   * client left, a 413/408 mid-body); -1 when no try was made. The done phase settles a call given up.
   */
  upstreamMs = -1;
  /** Milliseconds from upstreamSentAt until the last try's response head arrived; -1 while none came. */
  upstreamHeaderMs = -1;
  /** The endpoint's x-disabled-listeners. */
  disabledListeners: readonly string[] = NO_IDS;

  /** End-to-end request headers for the upstream, flat [name, value, ...], names lower-case. */
  headers: string[];
  /**
   * Request header lines a middleware took out of what the upstream gets (withhold(): apiKeyAuth's
   * hideCredentials, the pipeline's guard of hidden keys), flat [name, value, ...]; null when none.
   * What the client sent still decides for the middleware after it (clientFieldValue): a second
   * apiKeyAuth on the same header, a rate limit keyed on it, the response cache's Authorization rule.
   */
  withheld: string[] | null = null;
  /** The query as the client sent it (ctx.query loses hidden keys). */
  readonly clientQuery: string;
  /**
   * A request on the plain port with `plainPort: "redirect"`: the https authority it is sent to ('' when
   * it named no host: a 400). Null on every other request. The route phase answers it after the built-ins.
   */
  tlsRedirect: string | null = null;
  /** Who apiKeyAuth admitted; null when no key was checked. */
  consumer: string | null = null;
  /** Headers middleware adds to whatever answer the client gets, flat [name, value, ...]; null when none. */
  responseHeaders: string[] | null = null;
  /** Upstream response headers (lower-case names) the client must not get; null when none. */
  hiddenResponseHeaders: readonly string[] | null = null;
  /** Middleware watching the upstream's answer; null when none (the usual case). */
  observers: ResponseObserver[] | null = null;
  /**
   * A HEAD forwarded as GET (headAsGet) whose GET body an observer keeps (the response cache storing
   * it): the body is read to its end for the observers after the client got its head, and the request
   * is over then. Set by the observer at the answer's head; cleared when it stops wanting the rest
   * (the upstream call is then dropped).
   */
  observersWantBody = false;
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
  /** performance.now() when the request was over (the done phase sets it). */
  endedAt = 0;
  /** The client's side of this request (its transport adapter); set by the accept phase. */
  client: ClientSide | null = null;
  /** Counted among the worker's in-flight requests: held or forwarded, and not over yet. */
  inFlight = false;

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
  /** Status of the upstream's answer head (the last try's); 0 while none came. */
  upstreamStatus = 0;
  /** Why the last try failed: its UpstreamError code in lower case (e.g. `connect_refused`); null when it did not. */
  upstreamError: string | null = null;
  /** X-Cache of an answer the gateway served from its cache (HIT, STALE); null otherwise. */
  cache: string | null = null;
  /** The answer's head went out and its body did not reach the client whole. */
  cut = false;

  constructor(head: ParsedRequestHead) {
    this.method = head.method;
    this.path = head.url;
    this.query = head.query;
    this.peer = head.peer;
    this.forwardedFor = head.xForwardedFor;
    this.host = head.view?.host;
    this.clientQuery = head.query;
    this.startedAt = head.startedAt;
    this.hasBody = head.hasBody;
    this.secure = head.secure;
    this.bodyLength = head.contentLength;
    this.headers = head.forward;
    this.closeRequested = head.closeRequested === true;
    this.libraryCloses = head.libraryCloses === true;
  }

  /** Milliseconds from arrival to the end of the answer (set by the done phase). */
  get latencyMs(): number {
    return this.endedAt - this.startedAt;
  }

  /** The trace this request belongs to; '' before the head was read. */
  get traceId(): string {
    return this.trace === null ? '' : this.trace.traceId;
  }

  /** The first value of a request header the upstream would get (lower-case name); undefined when absent. */
  requestHeader(name: string): string | undefined {
    const headers = this.headers;
    for (let i = 0; i < headers.length; i += 2) if (headers[i] === name) return headers[i + 1];
    return undefined;
  }

  /**
   * A request header's field value (lower-case name): every field line of that name joined with ", ",
   * as RFC 9110 5.3 reads several lines; undefined when absent. What decides on a header (a key, a
   * bucket) reads this, so that two lines mean what one line with both values means: a proxy in front
   * that kept the last line and the gateway that kept the first would otherwise disagree.
   */
  requestFieldValue(name: string): string | undefined {
    return fieldValue(this.headers, name);
  }

  /** Takes every line of header `name` out of what the upstream gets, keeping it in `withheld`. */
  withhold(name: string): void {
    this.takeOut(name, true);
  }

  /** A request header's field value as the client sent it: what the upstream gets, else what a middleware withheld. */
  clientFieldValue(name: string): string | undefined {
    const value = fieldValue(this.headers, name);
    if (value !== undefined || this.withheld === null) return value;
    return fieldValue(this.withheld, name);
  }

  /** Removes every request header of that (lower-case) name before forwarding. */
  removeRequestHeader(name: string): void {
    this.takeOut(name, false);
  }

  /** Every line of header `name` out of `headers`; into `withheld` when `keep`. */
  private takeOut(name: string, keep: boolean): void {
    const headers = this.headers;
    let to = 0;
    for (let from = 0; from < headers.length; from += 2) {
      if (headers[from] === name) {
        if (keep) (this.withheld ??= []).push(name, headers[from + 1]!);
        continue;
      }
      headers[to++] = headers[from]!;
      headers[to++] = headers[from + 1]!;
    }
    // Setting length is a runtime call even when nothing was removed (the usual case).
    if (to !== headers.length) headers.length = to;
  }

  addResponseHeader(name: string, value: string): void {
    (this.responseHeaders ??= []).push(name, value);
  }

  /** Withholds these upstream response headers (lower-case names) too, beside any already withheld. */
  hideResponseHeaders(names: readonly string[]): void {
    const hidden = this.hiddenResponseHeaders;
    this.hiddenResponseHeaders = hidden === null ? names : joinedNames(hidden, names);
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

let joinedA: readonly string[] | null = null;
let joinedB: readonly string[] | null = null;
let joined: readonly string[] = [];

/**
 * `a` then `b`, as one list. The lists given are the features' own constant ones (request IDs, the
 * response cache), so the last join is kept and given again for the same two: no list per request,
 * and a list of the same identity each time (the writer keeps what it learned of one, HeadBlock).
 */
function joinedNames(a: readonly string[], b: readonly string[]): readonly string[] {
  if (a !== joinedA || b !== joinedB) {
    joined = Object.freeze([...a, ...b]);
    joinedA = a;
    joinedB = b;
  }
  return joined;
}
