import cluster, { type Worker } from 'node:cluster';
import { createInstanceCacheDir, type InstanceCacheDir } from '../cache/instance-dir.js';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfig } from '../config/load.js';
import { checkPorts, configWarnings } from '../config/semantic-checks.js';
import { discoverUpstream } from '../discovery/index.js';
import type { GatewayConfig } from '../config/types.js';
import { healthReport, type ReloadStatus } from '../builtins/healthcheck.js';
import { createLogger, levelFromEnv, type Logger } from '../log.js';
import { ACCESS_LOG_LISTENER } from '../listeners/access-log.js';
import { startExamplesChild, type ExampleUpstreams } from './examples.js';
import { WORKER_ENTRY } from './entry-files.js';
import { holdFreePort, type HeldPort } from './port-hold.js';
import { probePort } from './port-probe.js';
import { olderSharer } from './port-holder.js';
import { reportStartupFailure } from './startup-failure.js';
import { certificateGauge, certificateReport, expiryWarnings } from '../edge/certificate-report.js';
import { HealthPush } from './health-push.js';
import { MetricsHub } from './metrics-hub.js';
import { BreakerHub } from './breaker-hub.js';
import { StoreStates } from './store-states.js';
import { logStoreChanges } from './store-log.js';
import { LeaseBank } from '../stores/lease-bank.js';
import type { LeaseBankMessage } from '../stores/lease-messages.js';
import { LeaseOutbox } from './lease-outbox.js';
import { LOCAL_STORE } from '../stores/config.js';
import { Publisher, type Published } from './publisher.js';
import { componentStates, isOperational, workerStates } from './readiness.js';
import { Rediscovery } from './rediscovery.js';
import { Reloader, type ReloadResult, type WorkerReplacement } from './reloader.js';
import { Supervisor, type SupervisorEvents } from './supervisor.js';
import type { ApplyFailedMessage } from './messages.js';
import { timerDelay } from '../config/durations.js';
import { nodeAcceptsScavengeFlag, SCAVENGE_FLAG, workerExecArgv } from './worker-flags.js';
import { noInspectorSignalFlags } from './worker-signals.js';
import { heldSoFar, holdSignals, releaseSignals } from './held-signals.js';
import { routedSeries } from '../metrics/routed-series.js';

export interface PrimaryOptions {
  configFile: string;
  /** Overrides config.workers; 0 means one per CPU. */
  workers?: number;
  /** Overrides config.port; 0 means any free port. */
  port?: number;
  withExamples?: boolean;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The config file with the command line's overrides applied; throws ConfigError. What is likely a mistake in it is logged (configWarnings). */
function loadWithOverrides(options: PrimaryOptions, log: Logger): GatewayConfig {
  let config = loadConfig(options.configFile);
  for (const { pointer, reason } of configWarnings(config)) log.warn({ file: options.configFile, pointer }, `${options.configFile}: ${pointer}: ${reason}`);
  if (options.port !== undefined) {
    config = { ...config, port: options.port };
    const clashes = checkPorts(config);
    if (clashes.length > 0) throw new ConfigError(options.configFile, clashes);
  }
  if (options.workers !== undefined) config = { ...config, workers: options.workers };
  return config;
}

/** Runs the primary until SIGTERM/SIGINT/SIGQUIT; resolves with the exit code. */
export async function runPrimary(options: PrimaryOptions): Promise<number> {
  // Already held when started by the CLI (src/cli/main.ts); Primary.run() takes them over.
  holdSignals();
  const log = createLogger({ role: 'primary', workerId: 0, level: levelFromEnv() });
  let config: GatewayConfig;
  try {
    config = loadWithOverrides(options, log);
  } catch (err) {
    reportStartupFailure(log, describe(err), { file: options.configFile });
    return 1;
  }
  log.level = config.logLevel;

  // One gateway per port: the workers' SO_REUSEPORT would let a second one share it silently.
  const held = await heldPorts(config);
  if (held !== null) {
    reportStartupFailure(log, held, { port: config.port });
    return 1;
  }

  let examples: ExampleUpstreams | null = null;
  if (options.withExamples) {
    try {
      examples = await startExamplesChild(log);
    } catch (err) {
      reportStartupFailure(log, describe(err));
      return 1;
    }
  }
  // A port of 0 becomes a concrete free one (SO_REUSEPORT needs a non-zero port; every worker binds the
  // TLS and admin ports too), held until a worker listens on it (./port-hold.ts).
  const holds: HeldPort[] = [];
  const hold = async (host: string): Promise<number> => {
    const held = await holdFreePort(host);
    holds.push(held);
    return held.port;
  };
  if (config.port === 0) config = { ...config, port: await hold(config.host) };
  if (config.tls?.port === 0) config = { ...config, tls: { ...config.tls, port: await hold(config.host) } };
  if (config.admin?.port === 0) config = { ...config, admin: { ...config.admin, port: await hold(config.admin.host) } };
  const releasePorts = (): void => {
    for (const held of holds) held.release();
  };
  const stop = heldSoFar().stop;
  if (stop !== null) {
    log.info({ signal: stop }, `${stop} while the gateway was starting: it stops before starting any worker`);
    releasePorts();
    await examples?.stop();
    return 0;
  }
  return new Primary(log, options, config, examples, releasePorts).run();
}

/** The first of the ports the config opens (public, TLS, admin) another process listens on, as one line; null when none. */
async function heldPorts(config: GatewayConfig): Promise<string | null> {
  if (config.port !== 0 && config.tls?.plainPort !== 'off') {
    const held = await probePort(config.host, config.port, 'port');
    if (held !== null) return held;
  }
  if (config.tls !== undefined && config.tls.port !== 0) {
    const held = await probePort(config.host, config.tls.port, 'TLS port');
    if (held !== null) return held;
  }
  const admin = config.admin;
  if (admin !== undefined && admin.port !== 0) return probePort(admin.host, admin.port, 'admin port');
  return null;
}
/** How often the TLS certificates' expiry is checked again. */
const CERTIFICATE_CHECK_MS = 6 * 3600 * 1000;
/** How often the response cache's directory is checked (a worker that finds it gone says so at once). */
const CACHE_DIR_CHECK_MS = 5000;

class Primary {
  private readonly supervisor: Supervisor;
  private readonly publisher: Publisher;
  private readonly metrics: MetricsHub;
  private readonly breakers: BreakerHub;
  /** The `local` store's authoritative buckets, leased to the workers. */
  private readonly leases: LeaseBank;
  /** The bank's messages to each worker, one IPC message per event-loop turn (lease-outbox.ts). */
  private readonly toWorkers = new Map<number, LeaseOutbox<LeaseBankMessage>>();
  private readonly stores = new StoreStates();
  private readonly reloader: Reloader;
  private rediscovery: Rediscovery | null = null;
  private lastReload: ReloadStatus | null = null;
  /** Why workers could not apply the newest published table (worker messages), for the reload status. */
  private applyFailures: { tableVersion: number; errors: string[] } | null = null;
  private announcedPort = false;
  private operational = false;
  private readonly health: HealthPush;
  private shuttingDown = false;
  /** While the stop's drain phase runs (timeouts.shutdownDrainMs): /healthcheck is 503, everything else serves as before. */
  private draining: { signal: NodeJS.Signals; end: () => void } | null = null;
  private restarts = 0;
  private exitWith: (code: number) => void = () => {};
  private cacheDir: InstanceCacheDir | null = null;

  constructor(
    private readonly log: Logger,
    private readonly options: PrimaryOptions,
    config: GatewayConfig,
    private readonly examples: ExampleUpstreams | null,
    /** Lets go of the ports picked for port 0 (./port-hold.ts): once a worker listens, or at shutdown. */
    private readonly releasePorts: () => void = () => {},
  ) {
    const count = config.workers > 0 ? config.workers : availableParallelism();
    this.supervisor = new Supervisor({ log, count });
    this.publisher = new Publisher(log, (published) => this.onPublished(published));
    this.metrics = new MetricsHub({ log });
    this.metrics.setWorkerCount(0);
    this.breakers = new BreakerHub(
      () => this.config.circuitBreaker,
      (trip) => this.supervisor.broadcast({ type: 'breaker-trip', ...trip }),
    );
    this.metrics.setExtra('breakers', () => this.breakers.summary());
    // 0 from the start, so that a rate or an alert over it is defined before the first restart.
    this.metrics.setExtra('workerRestarts', 0);
    this.leases = new LeaseBank({ send: (workerId, message) => this.leaseOutbox(workerId).push(message) });
    this.metrics.setExtra('kvStores', () => (this.storeNames().length > 0 ? this.stores.metrics(this.storeNames()) : undefined));
    this.metrics.setExtra('tlsCertificates', () => certificateReport(this.config.tls));
    this.metrics.setPrometheusExtra(() => certificateGauge(this.config.tls));
    this.health = new HealthPush((message) => this.supervisor.broadcast(message));
    this.reloader = new Reloader({
      log,
      file: options.configFile,
      config,
      load: () => loadWithOverrides(options, log),
      discover: discoverUpstream,
      publisher: this.publisher,
      replaceWorkers: (settings, slots) => this.replaceWorkers(settings, slots),
      onChanged: () => this.refreshHealth(),
      onApplied: () => this.startRediscovery(),
      onOutcome: (result) => this.recordReload(result),
      probePort,
    });
  }

  /** The config that serves (a reload changes it). */
  private get config(): GatewayConfig {
    return this.reloader.config;
  }

  run(): Promise<number> {
    const done = new Promise<number>((resolve) => (this.exitWith = resolve));
    const flags = workerExecArgv(process.execArgv, nodeAcceptsScavengeFlag);
    if (flags.scavenging === 'refused') {
      this.log.warn({ flag: SCAVENGE_FLAG }, 'this Node refuses the flag: workers scavenge with V8\'s helper threads');
    }
    this.cacheDir = createInstanceCacheDir();
    setInterval(() => this.checkCacheDir(), CACHE_DIR_CHECK_MS).unref();
    cluster.setupPrimary({ exec: fileURLToPath(WORKER_ENTRY), args: [], execArgv: [...flags.execArgv, ...noInspectorSignalFlags()] });

    this.supervisor.on('hello', (slot, worker) => this.onHello(worker));
    this.supervisor.on('message', (slot, worker, message) => this.onWorkerMessage(slot.index, worker, message));
    this.supervisor.on('exit', (slot, workerId) => this.onWorkerExit(workerId));
    this.supervisor.on('delta', (workerId, delta) => this.metrics.addDelta(workerId, delta));
    this.supervisor.on('metrics-ask', (worker, ask) => {
      let body: string | null = null;
      try {
        body = this.metrics.answer(ask.format);
      } catch (err) {
        this.log.error({ err }, 'could not render the metrics report');
      }
      this.supervisor.send(worker, { type: 'metrics-answer', id: ask.id, body });
    });
    this.supervisor.on('retired', (workerId) => {
      this.metrics.workerGone(workerId);
      this.breakers.workerGone(workerId);
      this.stores.workerGone(workerId);
    });
    this.supervisor.on('lease', (workerId, message) => this.leases.receive(workerId, message));
    // Tokens a dead worker held count as spent (it may have admitted requests with them).
    cluster.on('exit', (worker) => {
      this.toWorkers.get(worker.id)?.drop();
      this.toWorkers.delete(worker.id);
      this.leases.workerGone(worker.id);
    });
    // SIGQUIT too: nginx's graceful stop, sent by habit; Node's default would end the primary at once, with no line.
    for (const signal of ['SIGTERM', 'SIGINT', 'SIGQUIT'] as const) process.on(signal, () => void this.shutdown(signal));
    process.on('SIGHUP', () => {
      if (!this.shuttingDown) this.reloader.sighup();
    });
    // Node's default for SIGUSR2 is to exit; nginx's binary upgrade signal, sent here by habit, must not stop the gateway.
    process.on('SIGUSR2', () => this.log.info('SIGUSR2 ignored: it has no meaning here'));
    // logrotate without copytruncate: the file was renamed; every worker opens its path anew.
    process.on('SIGUSR1', () => {
      this.log.info('SIGUSR1: workers reopen their log files');
      this.supervisor.broadcast({ type: 'reopen-logs' });
    });
    const early = releaseSignals();

    this.log.info(
      { workers: this.supervisor.slots.length, port: this.config.port, upstreams: this.config.upstreams.length },
      'gateway starting',
    );
    this.refreshHealth();
    for (const slot of this.supervisor.slots) this.supervisor.spawn(slot);

    this.reloader.start();
    if (early.hangup) {
      this.log.info('SIGHUP while the gateway was starting: the config is loaded again');
      this.reloader.sighup();
    }
    this.startRediscovery();
    this.warnExpiringCertificates();
    setInterval(() => this.warnExpiringCertificates(), CERTIFICATE_CHECK_MS).unref();
    return done;
  }

  /** A TLS certificate expiring within 14 days (or expired since it was loaded) is warned about. */
  private warnExpiringCertificates(): void {
    for (const { msg, ...fields } of expiryWarnings(this.config.tls, Date.now())) this.log.warn(fields, msg);
  }

  /** Re-discovery of the serving registry with the serving settings; replaces any running one. */
  private startRediscovery(): void {
    this.rediscovery?.stop();
    if (this.shuttingDown) return;
    const registry = this.reloader.upstreams;
    this.rediscovery = new Rediscovery({
      registry,
      discovery: this.config.discovery,
      discover: discoverUpstream,
      log: this.log,
      onRefreshed: (changed) => {
        if (registry !== this.reloader.upstreams || this.shuttingDown) return;
        this.refreshHealth();
        if (changed) void this.reloader.publish();
      },
    }).start();
  }

  private recordReload(result: ReloadResult): void {
    const status: ReloadStatus = {
      version: this.publisher.current?.message.tableVersion ?? null,
      at: new Date().toISOString(),
      ok: result.ok,
      applied: result.applied,
    };
    if (result.error !== undefined) status.error = result.error;
    if (result.warnings && result.warnings.length > 0) status.warnings = result.warnings;
    const failures = this.applyFailures;
    if (result.applied && failures !== null && failures.tableVersion === status.version) withApplyFailures(status, failures.errors);
    this.lastReload = status;
    this.metrics.setExtra('lastReload', status);
    if (result.applied) this.warnExpiringCertificates();
    this.refreshHealth();
  }

  /** One slot at a time, so the others keep serving while each successor starts; stops at the first that fails. */
  private async replaceWorkers(settings: readonly string[], only: readonly number[] | null): Promise<WorkerReplacement> {
    const replaced: number[] = [];
    for (const slot of this.supervisor.slots) {
      if (only && !only.includes(slot.index)) continue;
      if (this.shuttingDown) return { ok: false, error: 'the gateway is shutting down', replaced };
      const result = await this.supervisor.replace(slot, this.config.timeouts.shutdownGraceMs);
      if (!result.ok) {
        const left = this.supervisor.slots.length - slot.index - 1;
        this.log.warn({ slot: slot.index, settings, reason: result.reason, slotsLeft: left }, 'a new worker did not take over; its predecessor keeps serving');
        return { ok: false, error: `the new worker of slot ${slot.index} ${result.reason}`, replaced };
      }
      replaced.push(slot.index);
    }
    return { ok: true, replaced };
  }

  /**
   * A worker could not apply a published table (and serves the one before): logged, and a reload that
   * published that table is not ok, whether its status was recorded already or is still to come.
   */
  private onApplyFailed(worker: Worker, slot: number, message: ApplyFailedMessage): void {
    const error = `the worker of slot ${slot} (pid ${worker.process.pid ?? '?'}) could not apply table version ${message.tableVersion} and serves ${message.servingVersion === null ? 'nothing yet' : `table version ${message.servingVersion}`}: ${message.error}`;
    this.log.error({ worker: worker.id, slot, tableVersion: message.tableVersion, servingVersion: message.servingVersion }, error);
    if (message.tableVersion !== this.publisher.current?.message.tableVersion) return;
    if (this.applyFailures?.tableVersion !== message.tableVersion) this.applyFailures = { tableVersion: message.tableVersion, errors: [error] };
    else this.applyFailures.errors.push(error);
    const status = this.lastReload;
    if (status === null || !status.applied || status.version !== message.tableVersion) return;
    this.lastReload = withApplyFailures({ ...status }, [error]);
    this.metrics.setExtra('lastReload', this.lastReload);
    this.refreshHealth();
  }

  private onPublished(published: Published): void {
    this.metrics.setExtra('tableVersion', published.message.tableVersion);
    this.metrics.setHistogramBuckets(published.message.config.metrics.histogramBucketsS);
    this.metrics.retainRouted(routedSeries(published.message.table.routes.map(([method, template, , , targets]) => [method, template, targets.map((target) => target[0])])));
    this.supervisor.broadcast(published.message);
    this.refreshHealth(true);
  }

  /**
   * A new worker gets the current state: table, health (latched readiness included). It binds
   * its port only once it holds the health report (there always is one: refreshHealth runs before the
   * first worker starts).
   */
  private onHello(worker: Worker): void {
    this.metrics.setWorkerCount(this.supervisor.liveWorkers().length);
    // Before the table: a worker forked before the directory moved builds its cache where it now is.
    if (this.cacheDir) this.supervisor.send(worker, { type: 'cache-dir', dir: this.cacheDir.path });
    const published = this.publisher.current;
    if (published) this.supervisor.send(worker, published.message);
    if (this.health.current) this.supervisor.send(worker, this.health.current);
    this.refreshHealth();
  }

  private onWorkerMessage(slot: number, worker: Worker, message: SupervisorEvents['message'][2]): void {
    switch (message.type) {
      case 'listening':
        this.releasePorts();
        if (this.announcedPort) break;
        this.announcedPort = true;
        this.log.info(
          {
            host: this.config.host,
            port: message.port,
            ...(this.config.tls ? { tlsPort: this.config.tls.port } : {}),
            ...(this.config.admin ? { adminHost: this.config.admin.host, adminPort: this.config.admin.port } : {}),
          },
          'gateway listening',
        );
        this.giveWayToOlderSharer(message.port);
        break;
      case 'ready':
        this.log.debug({ worker: worker.id, tableVersion: message.tableVersion }, 'worker ready');
        this.refreshHealth();
        break;
      case 'apply-failed':
        this.onApplyFailed(worker, slot, message);
        break;
      case 'breakers':
        this.breakers.report(worker.id, message.circuits);
        this.metrics.touch();
        break;
      case 'stores':
        this.stores.report(worker.id, message.stores);
        logStoreChanges(this.log, this.stores.changes(this.storeNames()));
        this.metrics.touch();
        this.refreshHealth();
        break;
      case 'cache-dir-gone':
        this.checkCacheDir();
        break;
    }
  }

  /**
   * The response cache's directory (or a file of it) was removed or replaced under the running gateway
   * (a temporary-files cleaner): a new one, and every worker moves its cache there, so that no worker
   * opens a store of its own beside the others' (src/cache/lmdb-env.ts).
   */
  private checkCacheDir(): void {
    const cacheDir = this.cacheDir;
    if (cacheDir === null || this.shuttingDown) return;
    let moved: { was: string; now: string } | null;
    try {
      moved = cacheDir.check();
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      this.log.error({ dir: cacheDir.path, reason }, `the response cache directory ${cacheDir.path} is gone and no new one could be made (${reason}); tried again in ${CACHE_DIR_CHECK_MS / 1000} s`);
      return;
    }
    if (moved === null) return;
    this.log.warn(
      { was: moved.was, dir: moved.now },
      `the response cache directory ${moved.was} was removed or replaced (a temporary-files cleaner?); every worker moves its cache to ${moved.now}, empty`,
    );
    this.supervisor.broadcast({ type: 'cache-dir', dir: moved.now });
  }

  private onWorkerExit(workerId: number): void {
    this.metrics.workerGone(workerId);
    this.breakers.workerGone(workerId);
    this.stores.workerGone(workerId);
    this.metrics.setWorkerCount(this.supervisor.liveWorkers().length);
    if (!this.shuttingDown) this.metrics.setExtra('workerRestarts', ++this.restarts);
    this.refreshHealth();
  }

  private leaseOutbox(workerId: number): LeaseOutbox<LeaseBankMessage> {
    let outbox = this.toWorkers.get(workerId);
    if (outbox === undefined) {
      outbox = new LeaseOutbox((message) => this.supervisor.sendTo(workerId, message));
      this.toWorkers.set(workerId, outbox);
    }
    return outbox;
  }

  /** The stores the serving config's middleware can use: "local" and the kvStores; none without middleware. */
  private storeNames(): string[] {
    const config = this.config;
    return config.middleware.length === 0 && Object.keys(config.kvStores).length === 0 ? [] : [LOCAL_STORE, ...Object.keys(config.kvStores)];
  }

  /** Re-renders the health report, latches readiness, and pushes the report when it changed (`immediately`: see HealthPush.update). */
  private refreshHealth(immediately = false): void {
    const slots = this.supervisor.slots;
    const config = this.config;
    const listeners = componentStates([...(config.accessLog.enabled ? [ACCESS_LOG_LISTENER] : []), ...config.listeners.map((l) => l.id)], slots, 'listeners');
    const middleware = componentStates(config.middleware.map((m) => m.id), slots, 'middleware');
    const published = this.publisher.current;
    const tableVersion = published?.message.tableVersion ?? null;
    let becameOperational = false;
    if (
      !this.operational &&
      isOperational({
        slots,
        tableVersion,
        tableComplete: published?.complete ?? false,
        listeners,
        middleware,
      })
    ) {
      this.operational = true;
      becameOperational = true;
    }
    const report = healthReport({
        listeners,
        middleware,
        upstreams: this.reloader.upstreams.health(),
        reload: this.lastReload,
        workers: workerStates(slots, tableVersion),
        kvStores: this.storeNames().length > 0 ? this.stores.health(this.storeNames()) : undefined,
        tlsCertificates: certificateReport(this.config.tls),
      });
    const draining = this.draining;
    const body = JSON.stringify(
      draining === null ? report : { shuttingDown: `${draining.signal}: the gateway is shutting down; it serves until its drain ends`, ...report },
    );
    this.health.update(this.operational && draining === null ? 200 : 503, body, immediately);
    // After the workers were sent the 200: whoever waits for this line and asks /healthcheck at once
    // (a deploy script, a test) should not find a worker still holding the 503.
    if (becameOperational) this.log.info({ tableVersion }, 'gateway operational');
  }

  /**
   * The probe at start leaves a moment before the workers bind: a gateway started at the same moment
   * on the same port passes it too. Once listening, the younger of two that share the port stops.
   */
  private giveWayToOlderSharer(port: number): void {
    const own = new Set([process.pid, ...this.supervisor.liveWorkers().map((w) => w.process.pid ?? 0)]);
    const tlsPort = this.config.tls?.port;
    const shared: Array<[number, string]> = [[port, 'port']];
    if (tlsPort !== undefined && tlsPort !== port) shared.push([tlsPort, 'TLS port']);
    for (const [number, what] of shared) {
      const older = olderSharer(number, own);
      if (older === null) continue;
      reportStartupFailure(this.log, `${what} ${number} on ${this.config.host} is already in use by ${older}: stop it or choose another port`, { port: number });
      void this.shutdown('SIGTERM', 1);
      return;
    }
  }

  /**
   * The stop's first phase: /healthcheck answers 503 (a load balancer takes the gateway out of its pool)
   * while the workers accept and serve as before, for `drainMs` or until a second signal.
   */
  private async drain(signal: NodeJS.Signals, drainMs: number): Promise<void> {
    this.log.info({ signal, drainMs }, 'draining: /healthcheck answers 503, requests are served as before until the drain ends');
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, timerDelay(drainMs));
      this.draining = {
        signal,
        end: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      this.refreshHealth(true);
    });
    this.draining = null;
  }

  private async shutdown(signal: NodeJS.Signals, exitCode = 0): Promise<void> {
    if (this.shuttingDown) {
      if (this.draining !== null) {
        this.log.info({ signal }, `${signal} during the drain: the rest of it is skipped`);
        this.draining.end();
      }
      return;
    }
    this.shuttingDown = true;
    this.releasePorts();
    this.reloader.stop();
    this.rediscovery?.stop();
    // A gateway giving way to another on its port (exit code 1) serves nothing worth draining.
    const drainMs = exitCode === 0 ? this.config.timeouts.shutdownDrainMs : 0;
    if (drainMs > 0) await this.drain(signal, drainMs);
    const graceMs = this.config.timeouts.shutdownGraceMs;
    this.log.info({ signal, graceMs }, 'shutting down: workers stop accepting and finish in-flight requests');
    await this.supervisor.stop(graceMs, drainMs);
    this.leases.close();
    this.metrics.stop();
    this.health.stop();
    await Promise.allSettled([this.publisher.close(), this.examples?.stop()]);
    this.log.info('gateway stopped');
    this.exitWith(exitCode);
  }
}

/** A reload status whose table some workers could not apply: not ok, and why. */
function withApplyFailures(status: ReloadStatus, errors: readonly string[]): ReloadStatus {
  status.ok = false;
  status.error = [status.error, ...errors].filter((text) => text !== undefined).join('; ');
  return status;
}

