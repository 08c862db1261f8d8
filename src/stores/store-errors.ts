/**
 * Why a store could not decide. The caller maps any of them to the middleware's `onStoreError`
 * (allow or deny); `code` is for metrics and logs.
 *
 * - `timeout`: no answer within the command timeout (or the caller's budget, whichever is shorter).
 * - `breaker-open`: the store failed repeatedly; it is not called until its next probe.
 * - `offline`: not connected (connecting, or reconnecting after a loss).
 * - `server-error`: the server answered with an error.
 * - `closed`: the store was closed.
 */
export type StoreErrorCode = 'timeout' | 'breaker-open' | 'offline' | 'server-error' | 'closed';

export class StoreError extends Error {
  override readonly name = 'StoreError';

  constructor(
    /** The store's name (`local`, or its key in `kvStores`). */
    readonly store: string,
    readonly code: StoreErrorCode,
    /** What happened, without the store's name (for `server-error`: the server's error reply). */
    readonly detail: string,
    options?: { cause?: unknown },
  ) {
    super(`store "${store}": ${detail}`, options);
  }
}
