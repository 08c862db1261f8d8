/**
 * What a configured listener is to the worker (docs/reference/listeners.md): a RequestListener (src/exchange/listener.ts) the data
 * plane asks at routing time and tells when the client's answer is over, plus readiness and shutdown.
 * A type lives in a file of its own exporting its config schema and factory; registry.ts lists them.
 */
import type { RequestListener } from '../exchange/listener.js';

export interface Listener extends RequestListener {
  readonly type: string;
  /** Resolves once the listener works as configured (the health report lists it as ready); may reject. */
  ready(): Promise<void>;
  /** Stops taking requests, lets its work in flight finish (bounded) and frees what it holds. */
  close(): Promise<void>;
  /** Opens the files it writes again (SIGUSR1 to the primary, after logrotate renamed them). */
  reopen?(): Promise<void>;
}

/** Where listeners count what /metrics shows per listener id (dotted counter names). */
export interface ListenerMetrics {
  add(name: string, n?: number): void;
}

export interface ListenerContext {
  metrics: ListenerMetrics;
  /** Writes a log line (a mismatch log that cannot be written, an alternate that keeps failing). */
  warn(message: string, fields?: Record<string, unknown>): void;
  /** Directory that relative file paths (mismatchLog) resolve against; default process.cwd(). */
  cwd?: string;
  /** Seed of the samplers (tests); default random. */
  seed?: number;
}
