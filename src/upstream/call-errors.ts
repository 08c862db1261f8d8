/**
 * Why an upstream call failed, and what the data plane may do about it. `requestSent` and
 * `responseStarted` carry the retry rule: a call that never sent a byte (connect failures, queue
 * limits) may go to another host whatever its method; a sent one only when idempotent, without a
 * streamed body, and with no byte of the answer seen.
 */

export type UpstreamErrorCode =
  /** The upstream refused the TCP connection. */
  | 'CONNECT_REFUSED'
  /** Connecting (TCP, and TLS for https) took longer than connectTimeoutMs. */
  | 'CONNECT_TIMEOUT'
  /** The host could not be reached or resolved (EHOSTUNREACH, ENOTFOUND, ...). */
  | 'CONNECT_FAILED'
  /** The TLS handshake failed: certificate not trusted, wrong name, alert from the server. */
  | 'TLS'
  /** No complete answer head within headersTimeoutMs of the request (queue wait included). */
  | 'HEADERS_TIMEOUT'
  /** The answer body stalled for bodyTimeoutMs, or the upstream stopped reading the request body that long. */
  | 'BODY_TIMEOUT'
  /** The connection closed or was reset before the answer was complete. */
  | 'RESET'
  /** The answer broke the strict HTTP/1.1 rules (see the README's list). */
  | 'BAD_RESPONSE'
  /** Every connection is busy and the wait queue is full. */
  | 'QUEUE_FULL'
  /** Still waiting for a connection when headersTimeoutMs ran out. */
  | 'QUEUE_TIMEOUT'
  /** The request cannot be written as given (a header with CR/LF/NUL, a body longer or shorter than declared). */
  | 'BAD_REQUEST'
  /** The pool was closed. */
  | 'CLOSED';

export class UpstreamError extends Error {
  constructor(
    readonly code: UpstreamErrorCode,
    message: string,
    /** Some byte of the request may have reached the upstream. */
    readonly requestSent: boolean,
    /** Some byte of the answer arrived. */
    readonly responseStarted: boolean,
    /** The socket error behind it, if any. */
    override readonly cause?: unknown,
  ) {
    super(message);
  }

  override get name(): string {
    return 'UpstreamError';
  }
}
