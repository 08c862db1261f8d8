// Entry point of every cluster worker: serves HTTP with the table, spec and reports the primary pushes.
// First, before the modules below are evaluated: signals are held until handleWorkerSignals takes them.
import './hold-worker-signals.js';
import cluster from 'node:cluster';
import { createDataPlane, type DataPlane, type UnboundDataPlane } from '../proxy/data-plane.js';
import type { RequestListener } from '../exchange/listener.js';
import { builtinListeners } from '../listeners/registry.js';
import { recorderListener } from '../metrics/recorder-listener.js';
import { loadUws } from '../native/uws.js';
import { RoutingTable } from '../routing/table.js';
import { MetricsRecorder } from '../metrics/recorder.js';
import { routedSeries } from '../metrics/routed-series.js';
import { Counters } from '../metrics/counters.js';
import { ProcessMetricsSampler } from '../metrics/process-metrics.js';
import { Builtins } from '../builtins/index.js';
import { ACCESS_LOG_LISTENER, createAccessLog, type AccessLog } from '../listeners/access-log.js';
import { createLogger, levelFromEnv } from '../log.js';
import { exitAfterLogs } from '../log-exit.js';
import { startAdminListener, type AdminListener } from '../builtins/admin-listener.js';
import { AcceptPhase } from '../lifecycle/accept.js';
import { WorkerComponents } from './worker-components.js';
import { handleWorkerSignals } from './worker-signals.js';
import { timerDelay } from '../config/durations.js';
import { isLeaseBankMessage, type LeaseBankMessage, type LeaseBatchMessage, type LeaseWorkerMessage } from '../stores/lease-messages.js';
import { LeaseOutbox, receiveLeases } from './lease-outbox.js';
import { MetricsAsker } from './metrics-asker.js';
import {
  isPrimaryMessage,
  type HealthMessage,
  type PrimaryToWorker,
  type PublishMessage,
  type WorkerToPrimary,
} from './messages.js';
import { RequestObserve } from '../observe/request-observe.js';
import { moveInstanceEnv, onMissingInstanceDir } from '../cache/lmdb-env.js';

const METRICS_SHIP_INTERVAL_MS = 200;
/** The access log's dropped lines in /metrics (accessLog.droppedLines; gateway_access_log_dropped_lines_total). */
const DROPPED_LINES = 'accessLog.droppedLines';
/** Opt-in debug header naming the worker pid on built-in responses (tests use it to see both workers answer). */
const workerHeaderEnabled = process.env.GATEWAY_WORKER_HEADER === '1';

/**
 * Test-only fault injection, inert unless the variable is set (nothing in production sets it): a
 * comma-separated list of `exit:<name>` and `hang:<name>`. A worker whose first published config has
 * that `name` exits with code 1, or never reports ready, as a worker that cannot start with a reload's
 * new settings would. `name` is read at worker start, so a reload that changes it replaces the workers.
 */
const startFaults = new Map(
  (process.env.GATEWAY_TEST_WORKER_START_FAULT ?? '')
    .split(',')
    .map((item) => /^(exit|hang):(.+)$/.exec(item.trim()))
    .flatMap((match) => (match ? [[match[2]!, match[1]!] as const] : [])),
);

/**
 * Test-only fault injection, inert unless the variable is set (nothing in production sets it): a
 * published config with a middleware of this id cannot be applied, as when building one of its
 * components fails in this worker alone (the primary's checks passed).
 */
const applyFault = process.env.GATEWAY_TEST_WORKER_APPLY_FAULT || null;

/** A promise that settles the named variable's milliseconds after the worker starts; null when it is unset or not positive. */
function testDelay(variable: string): Promise<void> | null {
  const ms = Number(process.env[variable] ?? '') || 0;
  return ms > 0 ? new Promise<void>((resolve) => setTimeout(resolve, ms)) : null;
}

/**
 * Test-only delay, inert unless the variable is set (nothing in production sets it): the worker takes
 * in the primary's health reports only this many milliseconds after it starts, in the order they came,
 * as when a report arrives a read after the table that was sent before it (IPC is a byte stream: two
 * messages sent back to back can reach the worker in different event-loop turns).
 */
const healthDelayed = testDelay('GATEWAY_TEST_WORKER_HEALTH_DELAY_MS');
/**
 * Test-only, inert unless set: the worker's first `components.prepare` settles no sooner than this many
 * milliseconds after the worker starts, as a prepare that waits on I/O does (with `kvStores`, a
 * dynamic import).
 */
const prepareDelayed = testDelay('GATEWAY_TEST_WORKER_PREPARE_DELAY_MS');

const workerId = cluster.worker?.id ?? 0;
const log = createLogger({ role: 'worker', workerId, level: levelFromEnv() });
// First thing: until a SIGUSR1 listener exists, that signal opens Node's inspector (see worker-signals.ts).
// A primary that is gone leaves nobody to replace this worker or aggregate its metrics: it drains and exits.
handleWorkerSignals(log, (reason, signalled) => void shutdown(reason, signalled));
const builtins = new Builtins(
  { paths: { healthcheck: '/healthcheck', metrics: '/metrics', spec: '/spec' }, metrics: { enabled: true } },
  { workerHeader: workerHeaderEnabled ? String(process.pid) : undefined },
);
/**
 * The primary's first health report: the port is bound only once the worker holds it. It is a message
 * of its own, sent right after the table, but IPC is a byte stream: it can reach the worker event-loop
 * turns after the table. Bound before it, the worker answered /healthcheck (503, `{}`) with the
 * Builtins placeholder however long the gateway had been operational.
 */
const healthReport = arrival();
const recorder = new MetricsRecorder();
const counters = new Counters();
const processMetrics = new ProcessMetricsSampler();
/** The data plane, once it listens (the first publish is applied to it before: see apply). */
let dataPlane: DataPlane | null = null;
let accessLog: AccessLog | null = null;
let observe: RequestObserve | null = null;
let adminListener: AdminListener | null = null;
/** The table version this worker serves; null until the first is applied. */
let servingVersion: number | null = null;
let applying = false;
const components = new WorkerComponents({ counters, log, onReadiness: () => sendReady(), sendToBank: (message) => toBank.push(message), builtinListeners: () => builtins_() });
/** The access log's dropped lines counted into /metrics so far. */
let droppedShipped = 0;
/** The store snapshot last sent, as JSON (sent again only when it changed). */
let storesSent = '';
let graceMs = 10_000;
let drainMs = 0;
/** Ends the drain phase early, while it runs. */
let endDrain: (() => void) | null = null;
let metricsEnabled = true;
let stopping = false;
let unshipped = false;
let lastShippedInFlight = 0;

function send(message: WorkerToPrimary | LeaseWorkerMessage | LeaseBatchMessage<LeaseWorkerMessage>): void {
  if (process.connected) process.send?.(message, undefined, undefined, channelGone);
}

/**
 * process.send's callback: without one, a write to a channel whose primary has just died (EPIPE,
 * before the 'disconnect' event says so) is an 'error' event on `process`, which nothing handles: an
 * uncaught exception, and the worker exited at once instead of draining (worker-signals.ts handles
 * 'disconnect'). The drain follows from the disconnect; the message is lost with the primary.
 */
function channelGone(): void {}

/**
 * /metrics asks the primary for the merged report. This worker's own requests so far go first (IPC
 * keeps the order), so its client sees them counted; other workers' within their shipping interval.
 */
const metricsAsker = new MetricsAsker((ask) => {
  if (!process.connected || process.send === undefined) return false;
  shipMetrics();
  process.send(ask, undefined, undefined, channelGone);
  return true;
});
builtins.setMetricsSource((format) => metricsAsker.ask(format));

/** To the primary's lease bank: one message per event-loop turn (lease-outbox.ts). */
const toBank = new LeaseOutbox<LeaseWorkerMessage>(send);

const metricsListener = recorderListener(
  recorder,
  () => metricsEnabled,
  () => {
    unshipped = true;
  },
);

/** The built-in listeners: metrics, and the access log once created. */
function builtins_(): RequestListener[] {
  return builtinListeners(metricsListener, accessLog);
}

let breakersQueued = false;

/** Breaker changes go to the primary at the end of this turn (a burst of failures is one message). */
function onBreakersChanged(): void {
  if (breakersQueued) return;
  breakersQueued = true;
  setImmediate(() => {
    breakersQueued = false;
    if (dataPlane !== null) send({ type: 'breakers', circuits: dataPlane.breakerReport() });
  });
}

/** Deltas go to the primary only when something changed; the in-flight gauge comes from the data plane. */
function shipMetrics(): void {
  shipStores();
  const dropped = accessLog?.droppedLines() ?? 0;
  if (dropped !== droppedShipped) {
    counters.add(DROPPED_LINES, dropped - droppedShipped);
    droppedShipped = dropped;
  }
  const inFlight = dataPlane?.inFlight() ?? 0;
  const processSnapshot = processMetrics.take();
  if (!unshipped && inFlight === lastShippedInFlight && counters.isEmpty && processSnapshot === null) return;
  const delta = recorder.takeDelta();
  delta.inFlight = inFlight;
  if (processSnapshot !== null && dataPlane !== null) {
    delta.process = processSnapshot;
    delta.uws = `${dataPlane.uws.build}@${dataPlane.uws.version}`;
  }
  const counted = counters.take();
  if (counted !== null) delta.counters = counted;
  unshipped = false;
  lastShippedInFlight = inFlight;
  send({ type: 'metrics-delta', delta });
}

/** The stores' states and counters go to the primary (health report kvStores, /metrics) when they changed. */
function shipStores(): void {
  const snapshot = components.storeSnapshot();
  const text = JSON.stringify(snapshot);
  if (text === storesSent) return;
  storesSent = text;
  send({ type: 'stores', stores: snapshot });
}

/** Something the primary sends a new worker: `held` settles once `take` has been called. */
function arrival(): { held: Promise<void>; take: () => void } {
  let take: () => void = () => {};
  const held = new Promise<void>((resolve) => (take = resolve));
  return { held, take };
}

/** The first publish: the data plane it configures, not listening yet (the worker-start settings are read here). */
async function createServing(message: PublishMessage): Promise<UnboundDataPlane> {
  const fault = startFaults.get(message.config.name);
  if (fault) {
    log.warn({ fault, name: message.config.name }, 'GATEWAY_TEST_WORKER_START_FAULT names this config: failing the start on purpose');
    if (fault === 'exit') process.exit(1);
    await new Promise<never>(() => {});
  }
  const { accessLog: logConfig } = message.config;
  if (logConfig.enabled) {
    accessLog = createAccessLog({
      workerId,
      path: logConfig.destination === 'stdout' ? undefined : logConfig.destination,
      omit: logConfig.omit,
      // A JSON line like the gateway's other errors: a collector reading stdout would miss a warning on stderr.
      onBroken: (text) => {
        log.error({ destination: logConfig.destination }, text);
        sendReady();
      },
      onResumed: (text) => {
        log.info({ destination: logConfig.destination }, text);
        sendReady();
      },
    });
    // Present in /metrics from the start (0), so that a rate over it is defined before the first drop.
    counters.add(DROPPED_LINES, 0);
    await accessLog.ready;
  }
  observe = await RequestObserve.create(message.config, counters, (text) => log.warn(text), {}, (text) => log.info(text));
  return createDataPlane({ config: message.config, builtins: builtins.handle, listeners: builtins_(), counters, onBreakersChanged, observe, warn: (fields, text) => log.warn(fields, text) });
}

/**
 * Binds the public port, then the admin listener, once the worker can serve: the first publish is
 * applied to `plane`, and the primary's health report and metrics snapshot are held. SO_REUSEPORT: the
 * kernel hands this worker connections from the moment it binds.
 */
async function listen(plane: UnboundDataPlane, message: PublishMessage): Promise<DataPlane> {
  await healthReport.held;
  await plane.listen();
  log.info({ port: plane.port }, 'worker listening');
  const admin = message.config.admin;
  if (admin !== undefined) {
    const ids = message.config.requestId.enabled ? { header: message.config.requestId.header, trustedProxies: message.config.trustedProxies } : null;
    const via = `1.1 ${message.config.name}`;
    // The public port's target checks and normalization (encodedSlashes, limits.maxUrlBytes: worker-start settings).
    const accept = new AcceptPhase(message.config, via);
    adminListener = await startAdminListener(plane.uws, admin.host, admin.port, builtins.handleAdmin, via, (url, query) => accept.checkTarget(url, query), ids);
    log.info({ host: admin.host, port: adminListener.port }, 'admin listener listening');
  }
  send({ type: 'listening', port: plane.port });
  setInterval(shipMetrics, METRICS_SHIP_INTERVAL_MS).unref();
  return plane;
}

/**
 * Serves a published state. The first one is applied to a data plane that does not listen yet, which
 * binds only afterwards (see listen): no request reaches a worker without its table, upstreams, edge
 * settings and middleware. Later ones are swapped in while it serves.
 */
async function apply(message: PublishMessage): Promise<void> {
  const table = RoutingTable.fromTransferable(message.table);
  let starting: UnboundDataPlane | null = null;
  const plane = dataPlane ?? (starting = await createServing(message));
  await components.prepare(message.config);
  if (starting !== null && prepareDelayed !== null) await prepareDelayed;
  // Everything that can fail is built before anything changes: a config this worker cannot apply leaves it serving as it was.
  if (applyFault !== null && message.config.middleware.some((entry) => entry.id === applyFault)) {
    throw new Error(`GATEWAY_TEST_WORKER_APPLY_FAULT names middleware "${applyFault}": failing the apply on purpose`);
  }
  const staged = components.stage(message.config);
  builtins.configure(message.config);
  builtins.setSpec(message.spec.swagger2, message.spec.openapi3, message.spec.hosts);
  graceMs = message.config.timeouts.shutdownGraceMs;
  drainMs = message.config.timeouts.shutdownDrainMs;
  metricsEnabled = message.config.metrics.enabled;
  log.level = message.config.logLevel;
  // One synchronous step: no request sees the new table without the middleware that go with it.
  applying = true;
  try {
    // With the config: its upstreams' TLS settings (files read again at each reload) reach the pools.
    plane.setUpstreams(message.upstreams, message.config);
    plane.applyEdge(message.config);
    plane.setTable(table);
    recorder.retainRouted(routedSeries(table.routes().map((route) => [route.method, route.template, route.targets.map((target) => target.upstream)])));
    plane.setUndiscoveredUpstreams(message.undiscovered ?? 0);
    components.apply(staged, plane);
    servingVersion = message.tableVersion;
  } finally {
    applying = false;
  }
  // 'listening' goes before 'ready': a reload's successor takes its slot (its predecessor stops
  // accepting) on 'ready', so it must listen by then.
  if (starting !== null) dataPlane = await listen(starting, message);
  sendReady();
}

/** Tells the primary which table this worker serves and which listeners and middleware are ready (once it listens). */
function sendReady(): void {
  if (applying || servingVersion === null || dataPlane === null) return;
  send({
    type: 'ready',
    tableVersion: servingVersion,
    listeners: [...(accessLog ? [ACCESS_LOG_LISTENER] : []), ...components.readyListeners()],
    ...(accessLog?.failing() ? { failingListeners: [ACCESS_LOG_LISTENER] } : {}),
    middleware: components.readyMiddleware(),
  });
}

/**
 * `signalled`: a signal reached this worker. With timeouts.shutdownDrainMs it serves on for that long
 * first (the primary, which usually got the same signal from systemd or the terminal, has
 * /healthcheck answer 503 meanwhile), unless another signal or the primary's own shutdown message
 * (sent when the primary's drain ends) comes first.
 */
async function shutdown(reason: string, signalled = false): Promise<void> {
  if (stopping) {
    if (endDrain !== null) {
      log.info({ reason }, 'the rest of the drain is skipped');
      endDrain();
    }
    return;
  }
  stopping = true;
  if (signalled && drainMs > 0 && dataPlane !== null) {
    log.info({ reason, drainMs }, 'worker draining: serving as before until the drain ends');
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, timerDelay(drainMs));
      endDrain = () => {
        clearTimeout(timer);
        resolve();
      };
    });
    endDrain = null;
  }
  log.info({ reason, graceMs }, 'worker stopping: no new connections, finishing in-flight requests');
  const forceExit = setTimeout(() => {
    log.warn('in-flight requests outlived the grace; exiting anyway');
    process.exit(0);
  }, timerDelay(graceMs + 1000));
  forceExit.unref();
  const adminClosed = adminListener?.close(graceMs);
  try {
    await dataPlane?.close(graceMs);
  } catch (err) {
    log.error({ err }, 'data plane did not close cleanly');
  }
  await adminClosed;
  await components.close();
  toBank.flush();
  shipMetrics();
  await accessLog?.flush();
  await observe?.close();
  log.info('worker stopped');
  exitAfterLogs(0);
}

function takeHealth(message: HealthMessage): void {
  builtins.setHealth(message.status, message.body);
  healthReport.take();
}

// Messages are applied one at a time, in order, so a table never overtakes the one before it.
let queue: Promise<void> = Promise.resolve();

function onMessage(message: PrimaryToWorker): void {
  switch (message.type) {
    case 'publish':
      queue = queue.then(() => apply(message)).catch((err: unknown) => {
        if (!dataPlane) {
          log.fatal({ err, tableVersion: message.tableVersion }, 'could not start serving');
          process.exit(1);
        }
        log.error({ err, tableVersion: message.tableVersion }, 'could not apply the published table; the previous one keeps serving');
        send({ type: 'apply-failed', tableVersion: message.tableVersion, servingVersion, error: err instanceof Error ? err.message : String(err) });
      });
      break;
    case 'health':
      if (healthDelayed !== null) void healthDelayed.then(() => takeHealth(message));
      else takeHealth(message);
      break;
    case 'metrics-answer':
      metricsAsker.answered(message);
      break;
    case 'cache-dir':
      if (moveInstanceEnv(message.dir)) log.info({ dir: message.dir }, 'the response cache moved to a new directory');
      break;
    case 'breaker-trip':
      dataPlane?.tripBreaker(message.upstream, message.endpoint);
      break;
    case 'reopen-logs':
      // The reason only: a stack says nothing of a file that cannot be opened.
      accessLog?.reopen().catch((err: unknown) => {
        const reason = err instanceof Error ? err.message : String(err);
        log.error({ reason }, `could not reopen the access log: ${reason}`);
      });
      void components.reopenFiles().then((failures) => {
        for (const reason of failures) log.error({ reason }, `could not reopen a log file: ${reason}`);
      });
      break;
    case 'shutdown':
      graceMs = message.graceMs;
      void queue.then(() => shutdown('asked by the primary'));
      break;
  }
}

process.on('uncaughtException', (err) => {
  log.fatal({ err }, 'uncaught exception');
  process.exit(1);
});
try {
  log.info({ uws: loadUws() }, 'worker starting');
} catch (err) {
  log.fatal({ err }, 'no usable uWebSockets.js build');
  process.exit(1);
}
// The response cache's directory gone when this worker opens it: the primary makes another for every worker.
onMissingInstanceDir((dir) => {
  log.warn({ dir }, `the response cache directory ${dir} (or a file of it) is gone; the primary is asked for a new one`);
  send({ type: 'cache-dir-gone', dir });
});
const receiveLease = (lease: LeaseBankMessage): void => components.receiveLease(lease);
process.on('message', (message: unknown) => {
  if (!receiveLeases(message, isLeaseBankMessage, receiveLease) && isPrimaryMessage(message)) onMessage(message);
});
send({ type: 'hello' });
