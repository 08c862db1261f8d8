/**
 * Exiting without losing the last log lines, and without waiting on them forever. Kept apart from
 * log.ts so that the CLI's entry point can call it without loading pino.
 */

/** A log destination (pino's SonicBoom): flush(cb) calls back once the write in flight is done or failed. */
export interface FlushableDestination {
  flush(cb: (err?: Error) => void): void;
}

const destinations: FlushableDestination[] = [];

/** Registers a logger's destination with exitAfterLogs(). */
export function flushBeforeExit(destination: FlushableDestination): void {
  destinations.push(destination);
}

/**
 * Exits with `code` once the lines logged so far are written or have failed, at most `waitMs` later.
 * Exiting with a write in flight leaves it to pino's exit handler, whose synchronous flush retries a
 * failed write forever when stdout's reader is gone (sonic-boom 4 retries EPIPE like EAGAIN): a
 * gateway stopped with its log shipper dead logged "gateway stopped" and never exited
 * (test/cluster/cluster-shutdown-stdout-gone.test.ts). Once a write has failed with EPIPE, pino turns
 * that synchronous flush into a no-op.
 */
export function exitAfterLogs(code: number, waitMs = 2000): void {
  process.exitCode = code;
  const exit = (): never => process.exit(code);
  let pending = destinations.length;
  if (pending === 0) exit();
  setTimeout(exit, waitMs);
  for (const destination of destinations) {
    destination.flush(() => {
      if (--pending === 0) exit();
    });
  }
}
