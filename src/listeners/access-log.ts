import { pino, type Logger } from 'pino';

/** The listener id used in /healthcheck and in an endpoint's `x-disabled-listeners`. */
export const ACCESS_LOG_LISTENER = 'accessLog';

/** The fields of a finished request the access log reads (a subset of the data plane's request info). */
export interface FinishedRequest {
  method: string;
  path: string;
  routeTemplate: string | null;
  upstream: string | null;
  status: number;
  latencyMs: number;
  bytesIn: number;
  bytesOut: number;
  clientAddress: string;
  disabledListeners: readonly string[];
}

export interface AccessLog {
  /** Resolves once the destination can be written to. */
  readonly ready: Promise<void>;
  record(request: FinishedRequest): void;
  /** Writes out what is buffered; call on shutdown. */
  flush(): Promise<void>;
}

export interface AccessLogOptions {
  workerId: number;
  /** File descriptor to write to; stdout by default. */
  fd?: number;
  /** Longest a line may sit in the buffer. */
  flushIntervalMs?: number;
}

/**
 * One JSON line per request, kept off the hot path: lines are buffered and written asynchronously
 * in chunks. A chunk never exceeds PIPE_BUF (4096 bytes on Linux), so writes to a pipe shared with
 * the other processes of the cluster stay whole lines.
 */
export function createAccessLog({ workerId, fd = 1, flushIntervalMs = 250 }: AccessLogOptions): AccessLog {
  const destination = pino.destination({ dest: fd, sync: false, minLength: 2048, maxWrite: 4096, periodicFlush: flushIntervalMs });
  const logger: Logger = pino({ base: { pid: process.pid, role: 'worker', workerId, log: 'access' } }, destination);
  // An async SonicBoom announces 'ready' on a later tick, so listening now cannot miss it.
  const ready = new Promise<void>((resolve, reject) => {
    destination.once('ready', () => resolve());
    destination.once('error', reject);
  });

  return {
    ready,
    record(request) {
      if (request.disabledListeners.includes(ACCESS_LOG_LISTENER)) return;
      logger.info({
        method: request.method,
        path: request.path,
        status: request.status,
        endpoint: request.routeTemplate,
        upstream: request.upstream,
        latencyMs: request.latencyMs,
        bytesIn: request.bytesIn,
        bytesOut: request.bytesOut,
        client: request.clientAddress,
      }, 'request');
    },
    flush() {
      return new Promise((resolve) => {
        try {
          destination.flush(() => resolve());
        } catch {
          resolve();
        }
      });
    },
  };
}
