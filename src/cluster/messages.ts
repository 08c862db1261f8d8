import type { GatewayConfig } from '../config/types.js';
import type { RenderedSpec } from './compile-task.js';
import type { MetricsDelta } from '../metrics/delta.js';
import type { UpstreamWeight } from '../lifecycle/forward.js';
import type { CircuitReport } from '../proxy/upstream-breakers.js';
import type { LeaseBankMessage, LeaseBatchMessage } from '../stores/lease-messages.js';
import type { StoreSnapshot } from '../stores/config.js';
import type { TransferableTable } from '../routing/table.js';

/**
 * Everything the primary hands a worker to serve with. One message, so a worker never serves a
 * table with the wrong config, spec or weights; a SIGHUP reload goes through the same message.
 */
export interface PublishMessage {
  type: 'publish';
  tableVersion: number;
  /** The port is always concrete here: the primary has resolved `port: 0` to a free port. */
  config: GatewayConfig;
  table: TransferableTable;
  /** The rendered `/spec` documents (JSON text). */
  spec: RenderedSpec;
  /** Configured weights, for the balancer. */
  upstreams: UpstreamWeight[];
  /** Upstreams not in this table because their discovery is pending or failed (a 404 says so). */
  undiscovered?: number;
}

/** The rendered health report; every worker answers with it verbatim. */
export interface HealthMessage {
  type: 'health';
  status: 200 | 503;
  body: string;
}

/** The merged metrics report in the format a worker asked for (MetricsAskMessage with the same id); null: it could not be rendered. */
export interface MetricsAnswerMessage {
  type: 'metrics-answer';
  id: number;
  body: string | null;
}

/** Stop accepting, finish in-flight requests within the grace, then exit 0. */
export interface ShutdownMessage {
  type: 'shutdown';
  graceMs: number;
}

/** Failures summed over every worker reached a breaker's threshold: open it (see breaker-hub.ts). */
export interface BreakerTripMessage {
  type: 'breaker-trip';
  upstream: string;
  /** "METHOD template" of a host+endpoint breaker; null for the host's own. */
  endpoint: string | null;
}

/** SIGUSR1 reached the primary: reopen the log files (rotated away) by their paths. */
export interface ReopenLogsMessage {
  type: 'reopen-logs';
}

/**
 * The instance's response cache directory (src/cache/instance-dir.ts): on hello, and when the primary
 * found it removed or replaced and made a new one. A worker whose cache is elsewhere moves it there.
 */
export interface CacheDirMessage {
  type: 'cache-dir';
  dir: string;
}

export type PrimaryToWorker =
  | PublishMessage
  | CacheDirMessage
  | HealthMessage
  | MetricsAnswerMessage
  | ShutdownMessage
  | BreakerTripMessage
  | ReopenLogsMessage
  | LeaseBankMessage
  | LeaseBatchMessage<LeaseBankMessage>;

/**
 * Sent once the worker listens for messages: anything the primary sent before that could be lost,
 * so the primary sends a worker nothing until it has said hello.
 */
export interface HelloMessage {
  type: 'hello';
}

/** Sent once, when the worker's socket is bound. */
export interface ListeningMessage {
  type: 'listening';
  port: number;
}

/** The worker listens with this table version; sent again when a listener or middleware gets ready. */
export interface ReadyMessage {
  type: 'ready';
  tableVersion: number;
  /** Listeners it has initialized (the access log, and the configured ones that are ready). */
  listeners: string[];
  /** Of those, the ones failing now (the access log while it cannot write). */
  failingListeners?: string[];
  /** Middleware ids that are ready (built, their store answered or gave up). */
  middleware: string[];
}

/** A published table and config this worker could not apply: it serves `servingVersion` (null: nothing yet) on. */
export interface ApplyFailedMessage {
  type: 'apply-failed';
  tableVersion: number;
  servingVersion: number | null;
  error: string;
}

export interface MetricsDeltaMessage {
  type: 'metrics-delta';
  delta: MetricsDelta;
}

/** A /metrics request arrived: the primary renders the merged report in `format` and answers this worker. */
export interface MetricsAskMessage {
  type: 'metrics-ask';
  id: number;
  format: 'json' | 'prometheus';
}

/** The worker's breakers changed: every circuit it tracks, as it stands now. */
export interface BreakersMessage {
  type: 'breakers';
  circuits: CircuitReport[];
}

/** The worker's stores as they stand (state, last error, counters), sent when that changed. */
export interface StoresMessage {
  type: 'stores';
  stores: Record<string, StoreSnapshot>;
}

/** The worker was opening the response cache directory and found it, or a file of it, gone. */
export interface CacheDirGoneMessage {
  type: 'cache-dir-gone';
  dir: string;
}

export type WorkerToPrimary =
  | HelloMessage
  | ListeningMessage
  | ReadyMessage
  | ApplyFailedMessage
  | MetricsDeltaMessage
  | MetricsAskMessage
  | BreakersMessage
  | StoresMessage
  | CacheDirGoneMessage;

function hasType(value: unknown): value is { type: unknown } {
  return typeof value === 'object' && value !== null && 'type' in value;
}

export function isWorkerMessage(value: unknown): value is WorkerToPrimary {
  return (
    hasType(value) &&
    (value.type === 'hello' ||
      value.type === 'listening' ||
      value.type === 'ready' ||
      value.type === 'apply-failed' ||
      value.type === 'metrics-delta' ||
      value.type === 'metrics-ask' ||
      value.type === 'breakers' ||
      value.type === 'stores' ||
      value.type === 'cache-dir-gone')
  );
}

export function isPrimaryMessage(value: unknown): value is PrimaryToWorker {
  return (
    hasType(value) &&
    (value.type === 'publish' ||
      value.type === 'cache-dir' ||
      value.type === 'health' ||
      value.type === 'metrics-answer' ||
      value.type === 'shutdown' ||
      value.type === 'breaker-trip' ||
      value.type === 'reopen-logs')
  );
}
