/** How an error from undici turns into the gateway's answer (contract 6). */

/**
 * Whether a failed request may go to another host of its endpoint (once):
 * - `unsent`: the connection was never made, so nothing reached the upstream: any method;
 * - `idempotent`: bytes may have reached it but no answer came: GET, HEAD, OPTIONS, PUT, DELETE only;
 * - `never`: a timeout (the time budget is spent) or a fault of the request itself.
 */
export type RetryRule = 'unsent' | 'idempotent' | 'never';

export interface ForwardFailure {
  status: number;
  /** Counts against the upstream's circuit breakers. */
  upstreamFault: boolean;
  retry: RetryRule;
  detail: string;
}

const TIMEOUT: ForwardFailure = { status: 504, upstreamFault: true, retry: 'never', detail: 'the upstream did not answer in time' };
const CONNECT_TIMEOUT: ForwardFailure = { status: 504, upstreamFault: true, retry: 'unsent', detail: 'connecting to the upstream timed out' };
const REFUSED: ForwardFailure = { status: 502, upstreamFault: true, retry: 'unsent', detail: 'the upstream refused the connection' };
const RESET: ForwardFailure = { status: 502, upstreamFault: true, retry: 'idempotent', detail: 'the upstream closed the connection without a complete answer' };
const UNREACHABLE: ForwardFailure = { status: 502, upstreamFault: true, retry: 'unsent', detail: 'the upstream could not be reached' };
const BAD_RESPONSE: ForwardFailure = { status: 502, upstreamFault: true, retry: 'idempotent', detail: 'the upstream sent an invalid response' };
const NOT_FORWARDABLE: ForwardFailure = { status: 400, upstreamFault: false, retry: 'never', detail: 'the request cannot be forwarded as sent' };
const SHUTTING_DOWN: ForwardFailure = { status: 503, upstreamFault: false, retry: 'never', detail: 'the gateway is shutting down' };

/** RFC 9110 9.2.2, less the ones a gateway has no business replaying (TRACE). */
export function isIdempotent(method: string): boolean {
  return method === 'GET' || method === 'HEAD' || method === 'OPTIONS' || method === 'PUT' || method === 'DELETE';
}

export function classifyForwardError(err: unknown): ForwardFailure {
  const code = (err as { code?: unknown } | null)?.code;
  switch (code) {
    case 'UND_ERR_HEADERS_TIMEOUT':
    case 'UND_ERR_BODY_TIMEOUT':
      return TIMEOUT;
    case 'UND_ERR_CONNECT_TIMEOUT':
    case 'ETIMEDOUT':
      return CONNECT_TIMEOUT;
    case 'ECONNREFUSED':
      return REFUSED;
    case 'ECONNRESET':
    case 'EPIPE':
    case 'UND_ERR_SOCKET':
      return RESET;
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return UNREACHABLE;
    case 'UND_ERR_INVALID_ARG':
    case 'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH':
    case 'UND_ERR_NOT_SUPPORTED':
      return NOT_FORWARDABLE;
    case 'UND_ERR_CLOSED':
    case 'UND_ERR_DESTROYED':
      return SHUTTING_DOWN;
    default:
      return code === 'HPE_INVALID_CONSTANT' || (typeof code === 'string' && code.startsWith('HPE_')) ? BAD_RESPONSE : RESET;
  }
}
