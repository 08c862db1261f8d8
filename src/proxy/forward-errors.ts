/** How an error from undici turns into the gateway's answer (contract 6). */

export interface ForwardFailure {
  status: number;
  /** Counts against the upstream's circuit breakers. */
  upstreamFault: boolean;
  detail: string;
}

const TIMEOUT: ForwardFailure = { status: 504, upstreamFault: true, detail: 'the upstream did not answer in time' };
const CONNECT_TIMEOUT: ForwardFailure = { status: 504, upstreamFault: true, detail: 'connecting to the upstream timed out' };
const REFUSED: ForwardFailure = { status: 502, upstreamFault: true, detail: 'the upstream refused the connection' };
const RESET: ForwardFailure = { status: 502, upstreamFault: true, detail: 'the upstream closed the connection without a complete answer' };
const UNREACHABLE: ForwardFailure = { status: 502, upstreamFault: true, detail: 'the upstream could not be reached' };
const BAD_RESPONSE: ForwardFailure = { status: 502, upstreamFault: true, detail: 'the upstream sent an invalid response' };
const NOT_FORWARDABLE: ForwardFailure = { status: 400, upstreamFault: false, detail: 'the request cannot be forwarded as sent' };
const SHUTTING_DOWN: ForwardFailure = { status: 503, upstreamFault: false, detail: 'the gateway is shutting down' };

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
