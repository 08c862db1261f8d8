import type { ContentAnswer } from './answer.js';

/**
 * What substitute() may give for a 304 that answers conditions the observer added and that it cannot
 * use (the response cache: a 304 naming another representation than the stored one, RFC 9111 4.3.4).
 * The request is sent again to the same host, as ctx.headers now are (the observer took its
 * conditions out); nothing of the 304 reaches the client. At most once per request.
 */
export const SEND_AGAIN: unique symbol = Symbol('send again');

/**
 * Watches the upstream's answer on its way to the client (a middleware's response side, e.g. the
 * response cache storing it; a listener's capture). The response chain calls observers in the reverse
 * order of their registration, each call guarded: an observer that throws is reported, never the
 * client's problem.
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
   * The upstream failed (no answer, or a 5xx), or answered 304, and nothing has reached the client
   * yet: content to send instead (stale-if-error; a revalidated entry), or null. `headers`: the
   * upstream's end-to-end headers when it answered. SEND_AGAIN for a 304 only.
   */
  substitute(status: number, headers?: readonly string[]): ContentAnswer | typeof SEND_AGAIN | null;
}
