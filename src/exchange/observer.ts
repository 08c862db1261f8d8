import type { ContentAnswer } from './answer.js';

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
   * upstream's end-to-end headers when it answered.
   */
  substitute(status: number, headers?: readonly string[]): ContentAnswer | null;
}
