/** How a failed upstream call (src/upstream/call-errors.ts) turns into the gateway's answer (docs/reference/respond.md#errors-the-gateway-answers, docs/reference/forward.md#retries). */
import type { UpstreamError } from '../upstream/call-errors.js';
import { tlsFailureKind, type TlsFailureKind } from './upstream-tls-failures.js';

/**
 * Whether a failed request may go to another host of its endpoint (once):
 * - `unsent`: no byte of the request left (refused, unreachable, connect timeout, TLS refused): any method;
 * - `idempotent`: bytes may have reached the upstream but no byte of an answer came back: GET, HEAD,
 *   OPTIONS, PUT, DELETE only;
 * - `never`: a timeout (the time budget is spent), an answer that had started (the upstream did act on
 *   the request; an answer the strict parser refused included), or a fault of the request or of the gateway.
 */
export type RetryRule = 'unsent' | 'idempotent' | 'never';

export interface ForwardFailure {
  status: number;
  /** Counts against the upstream's circuit breakers. */
  upstreamFault: boolean;
  retry: RetryRule;
  detail: string;
  /** The /metrics counter it adds to (`upstreamFailures.*`), null for none. */
  counter: string | null;
}

function failure(status: number, upstreamFault: boolean, retry: RetryRule, counter: string | null, detail: string): ForwardFailure {
  return Object.freeze({ status, upstreamFault, retry, detail, counter });
}

const REFUSED = failure(502, true, 'unsent', 'upstreamFailures.connectFailures', 'the upstream refused the connection');
const UNREACHABLE = failure(502, true, 'unsent', 'upstreamFailures.connectFailures', 'the upstream could not be reached');
/** Exported for the WebSocket leg, which answers a connect timeout as a request's. */
export const CONNECT_TIMEOUT = failure(504, true, 'unsent', 'upstreamFailures.connectFailures', 'connecting to the upstream timed out');
const tlsFailed = (why: string) => failure(502, true, 'unsent', 'upstreamFailures.tlsFailures', `the TLS handshake with the upstream failed${why}`);
/** By what Node's error says went wrong (./upstream-tls-failures.ts); the log line has the error itself. */
const TLS_FAILED: Readonly<Record<TlsFailureKind, ForwardFailure>> = {
  certificate: tlsFailed(': its certificate is not trusted'),
  name: tlsFailed(': its certificate is for another name'),
  notTls: tlsFailed(': the upstream does not speak TLS on that port'),
  closed: tlsFailed(': the upstream closed the connection'),
  alert: tlsFailed(': the upstream refused it'),
  other: tlsFailed(''),
};
const TIMEOUT = failure(504, true, 'never', 'upstreamFailures.timeouts', 'the upstream did not answer in time');
// The gateway's own queue, as QUEUE_FULL: not held against the host's breakers (a burst on a small pool is not a sick host).
const QUEUE_TIMEOUT = failure(504, false, 'never', 'upstreamFailures.timeouts', 'no connection to the upstream became free in time');
const RESET_UNSENT = failure(502, true, 'unsent', 'upstreamFailures.resets', 'the upstream closed the connection before the request was sent');
const RESET = failure(502, true, 'idempotent', 'upstreamFailures.resets', 'the upstream closed the connection without answering');
const RESET_MID_ANSWER = failure(502, true, 'never', 'upstreamFailures.resets', 'the upstream closed the connection before its answer was complete');
const BAD_RESPONSE = failure(502, true, 'never', 'upstreamFailures.badResponses', 'the upstream sent an invalid response');
const QUEUE_FULL = failure(503, false, 'never', 'upstreamFailures.queueFull', 'every connection to the upstream is busy and too many requests wait for one');
const NOT_FORWARDABLE = failure(400, false, 'never', null, 'the request cannot be forwarded as sent');
const SHUTTING_DOWN = failure(503, false, 'never', null, 'the gateway is shutting down');

/** A failed TLS handshake with an upstream, by Node's error (`cause`): the HTTP path's and the WebSocket leg's. */
export function tlsHandshakeFailure(cause: unknown): ForwardFailure {
  return TLS_FAILED[tlsFailureKind(cause)];
}

/** RFC 9110 9.2.2, less the ones a gateway has no business replaying (TRACE). */
export function isIdempotent(method: string): boolean {
  return method === 'GET' || method === 'HEAD' || method === 'OPTIONS' || method === 'PUT' || method === 'DELETE';
}

/** Status, breaker and retry consequences of an upstream call's failure, from its code and how far it got. */
export function classifyUpstreamError(err: UpstreamError): ForwardFailure {
  switch (err.code) {
    case 'CONNECT_REFUSED':
      return REFUSED;
    case 'CONNECT_FAILED':
      return UNREACHABLE;
    case 'CONNECT_TIMEOUT':
      return CONNECT_TIMEOUT;
    case 'TLS':
      return tlsHandshakeFailure(err.cause);
    case 'HEADERS_TIMEOUT':
    case 'BODY_TIMEOUT':
      return TIMEOUT;
    case 'QUEUE_TIMEOUT':
      return QUEUE_TIMEOUT;
    case 'RESET':
      if (!err.requestSent) return RESET_UNSENT;
      return err.responseStarted ? RESET_MID_ANSWER : RESET;
    case 'BAD_RESPONSE':
      return BAD_RESPONSE;
    case 'QUEUE_FULL':
      return QUEUE_FULL;
    case 'BAD_REQUEST':
      return NOT_FORWARDABLE;
    case 'CLOSED':
      return SHUTTING_DOWN;
    default:
      return RESET_MID_ANSWER;
  }
}
