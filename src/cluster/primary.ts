import cluster from 'node:cluster';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../config/load.js';
import { discoverUpstream } from '../discovery/index.js';
import type { GatewayConfig } from '../config/types.js';
import { healthReport, type ComponentStates, type ReloadStatus } from '../builtins/healthcheck.js';
import { createLogger, levelFromEnv, type Logger } from '../log.js';
import { ACCESS_LOG_LISTENER } from '../listeners/access-log.js';
import { startExamplesChild, type ExampleUpstreams } from './examples.js';
import { findFreePort } from './free-port.js';
import type { HealthMessage } from './messages.js';
import { MetricsHub } from './metrics-hub.js';
import { BreakerHub } from './breaker-hub.js';
import { Publisher, type Published, type PublishOutcome } from './publisher.js';
import { isOperational, listenerStates } from './readiness.js';
import { Rediscovery } from './rediscovery.js';
import { describeReloadProblems, newFailures, newTemplateProblems } from './reload-problems.js';
import { Supervisor, type SupervisorEvents, type WorkerSlot } from './supervisor.js';
import { UpstreamRegistry } from './upstreams.js';

export interface PrimaryOptions {
  configFile: string;
  /** Overrides config.workers; 0 means one per CPU. */
  workers?: number;
  /** Overrides config.port; 0 means any free port. */
  port?: number;
  withExamples?: boolean;
}

const NO_MIDDLEWARE: ComponentStates = { pending: [], ready: [] };

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The config file with the command line's overrides applied; throws ConfigError. */
function loadWithOverrides(options: PrimaryOptions): GatewayConfig {
  let config = loadConfig(options.configFile);
  if (options.port !== undefined) config = { ...config, port: options.port };
  if (options.workers !== undefined) config = { ...config, workers: options.workers };
  return config;
}

/** Settings a running gateway cannot change: the listening socket and the number of workers. */
const RESTART_ONLY = ['port', 'host', 'workers', 'admin'] as const;

/** Settings a worker reads once, when it starts: a reload that changes them replaces the workers. */
const WORKER_START = ['name', 'trustedProxies', 'encodedSlashes', 'timeouts', 'limits', 'circuitBreaker', 'upstreamWeighting', 'accessLog'] as const;

function changed<K extends keyof GatewayConfig>(keys: readonly K[], before: GatewayConfig, after: GatewayConfig): K[] {
  return keys.filter((key) => JSON.stringify(before[key]) !== JSON.stringify(after[key]));
}

/** Runs the primary until SIGTERM/SIGINT; resolves with the exit code. */
export async function runPrimary(options: PrimaryOptions): Promise<number> {
  const log = createLogger({ role: 'primary', workerId: 0, level: levelFromEnv() });
  let config: GatewayConfig;
  try {
    config = loadWithOverrides(options);
  } catch (err) {
    log.error({ file: options.configFile }, describe(err));
    return 1;
  }
  log.level = config.logLevel;

  let examples: ExampleUpstreams | null = null;
  if (options.withExamples) {
    try {
      examples = await startExamplesChild(log);
    } catch (err) {
      log.error(describe(err));
      return 1;
    }
  }
  if (config.port === 0) config = { ...config, port: await findFreePort(config.host) };
  // Every worker binds the admin port too: it must be concrete (SO_REUSEPORT needs a non-zero port).
  if (config.admin?.port === 0) config = { ...config, admin: { ...config.admin, port: await findFreePort(config.admin.host) } };
  return new Primary(log, options, config, examples).run();
}

class Primary {
  private readonly supervisor: Supervisor;
  private readonly publisher: Publisher;
  private readonly metrics: MetricsHub;
  private readonly breakers: BreakerHub;
  private upstreams: UpstreamRegistry;
  /** Aborts the discovery in progress: the initial one, or a reload's. */
  private discovery = new AbortController();
  private rediscovery: Rediscovery | null = null;
  private lastReload: ReloadStatus | null = null;
  private reloading = false;
  /** A SIGHUP came while a reload ran: the file may have changed again, so read it once more after. */
  private reloadAgain = false;
  private announcedPort = false;
  private operational = false;
  private health: HealthMessage | null = null;
  private shuttingDown = false;
  private restarts = 0;
  private exitWith: (code: number) => void = () => {};

  constructor(
    private readonly log: Logger,
    private readonly options: PrimaryOptions,
    private config: GatewayConfig,
    private readonly examples: ExampleUpstreams | null,
  ) {
    const count = config.workers > 0 ? config.workers : availableParallelism();
    this.upstreams = new UpstreamRegistry(config.upstreams);
    this.supervisor = new Supervisor({ log, count });
    this.publisher = new Publisher(log, (published) => this.onPublished(published));
    this.metrics = new MetricsHub({ log, broadcast: (message) => this.supervisor.broadcast(message) });
    this.metrics.setWorkerCount(0);
    this.breakers = new BreakerHub(config.circuitBreaker, (trip) => this.supervisor.broadcast({ type: 'breaker-trip', ...trip }));
    this.metrics.setExtra('breakers', () => this.breakers.summary());
  }

  run(): Promise<number> {
    const done = new Promise<number>((resolve) => (this.exitWith = resolve));
    cluster.setupPrimary({ exec: fileURLToPath(new URL('./worker.js', import.meta.url)), args: [] });

    this.supervisor.on('hello', (slot) => this.onHello(slot));
    this.supervisor.on('message', (slot, message) => this.onWorkerMessage(slot, message));
    this.supervisor.on('exit', (slot, workerId) => this.onWorkerExit(slot, workerId));
    this.supervisor.on('delta', (workerId, delta) => this.metrics.addDelta(workerId, delta));
    this.supervisor.on('retired', (workerId) => {
      this.metrics.workerGone(workerId);
      this.breakers.workerGone(workerId);
    });
    for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => void this.shutdown(signal));
    process.on('SIGHUP', () => this.onSighup());

    this.log.info(
      { workers: this.supervisor.slots.length, port: this.config.port, upstreams: this.config.upstreams.length },
      'gateway starting',
    );
    this.refreshHealth();
    for (const slot of this.supervisor.slots) this.supervisor.spawn(slot);

    this.publishWhenSettled(this.upstreams);
    void this.upstreams.discoverAll(discoverUpstream, this.config.discovery, this.log, this.discovery.signal);
    void this.publish();
    this.startRediscovery();
    return done;
  }

  /** Each upstream that settles is published at once, as long as its registry is the current one. */
  private publishWhenSettled(registry: UpstreamRegistry): void {
    registry.on('settled', () => {
      if (registry !== this.upstreams || this.shuttingDown) return;
      this.refreshHealth();
      void this.publish();
    });
  }

  /** Re-discovery of the current registry with the current settings; replaces any running one. */
  private startRediscovery(): void {
    this.rediscovery?.stop();
    if (this.shuttingDown) return;
    const registry = this.upstreams;
    this.rediscovery = new Rediscovery({
      registry,
      discovery: this.config.discovery,
      discover: discoverUpstream,
      log: this.log,
      onSwept: (changed) => {
        if (registry !== this.upstreams || this.shuttingDown) return;
        this.refreshHealth();
        if (changed) void this.publish();
      },
    }).start();
  }

  /** Reloads run one at a time; SIGHUPs that arrive meanwhile collapse into one more run. */
  private onSighup(): void {
    if (this.shuttingDown) return;
    if (this.reloading) {
      this.reloadAgain = true;
      // Waiting on the running reload's discovery is pointless: its file is already outdated.
      this.discovery.abort();
      return;
    }
    this.reloading = true;
    void (async () => {
      try {
        do {
          this.reloadAgain = false;
          await this.reload();
        } while (this.reloadAgain && !this.shuttingDown);
      } catch (err) {
        this.log.error({ err }, 'config reload failed unexpectedly; the current config keeps serving');
      } finally {
        this.reloading = false;
      }
    })();
  }

  /**
   * SIGHUP: a config that does not load is refused and the current one keeps serving. A good one has
   * its new and changed upstreams discovered off to the side (unchanged ready ones are kept as they
   * are), is compiled on the compile thread, then swapped in through publish(); workers swap tables
   * between requests, so none is dropped. The outcome is recorded in /metrics and the health report.
   */
  private async reload(): Promise<void> {
    let next: GatewayConfig;
    try {
      next = loadWithOverrides(this.options);
    } catch (err) {
      const error = describe(err);
      this.log.error({ file: this.options.configFile }, `config reload refused, the current config keeps serving: ${error}`);
      this.recordReload({ ok: false, applied: false, error });
      return;
    }
    const unchangeable = changed(RESTART_ONLY, this.config, next);
    if (unchangeable.length > 0) {
      this.log.warn({ settings: unchangeable }, 'these settings change on restart only; their current values stay');
    }
    for (const key of RESTART_ONLY) next = { ...next, [key]: this.config[key] };

    this.discovery.abort();
    const discovery = new AbortController();
    this.discovery = discovery;
    // Re-discovery would publish the registry this reload is about to replace.
    this.rediscovery?.stop();
    try {
      await this.applyReload(next, unchangeable, discovery.signal);
    } finally {
      this.startRediscovery();
    }
  }

  private async applyReload(next: GatewayConfig, unchangeable: readonly string[], signal: AbortSignal): Promise<void> {
    const upstreams = new UpstreamRegistry(next.upstreams);
    const adopted = upstreams.adoptUnchanged(this.upstreams);
    this.log.info(
      { file: this.options.configFile, upstreams: next.upstreams.length, fetching: next.upstreams.length - adopted },
      'config reload: discovering new and changed upstreams',
    );
    await upstreams.discoverAll(discoverUpstream, next.discovery, this.log, signal);
    // Superseded by a newer SIGHUP (which records its own outcome), or shutting down.
    if (signal.aborted || this.shuttingDown) return;

    const previous = { config: this.config, upstreams: this.upstreams };
    const problemsBefore = this.publisher.current?.problems ?? [];
    const workerSettings = changed(WORKER_START, this.config, next);
    this.config = next;
    this.log.level = next.logLevel;
    this.upstreams = upstreams;
    this.breakers.setSettings(next.circuitBreaker);
    const outcome = await this.publish();
    if (!outcome.ok) {
      this.restore(previous);
      this.log.error(`config reload failed, the current config keeps serving: ${outcome.error}`);
      this.recordReload({ ok: false, applied: false, error: outcome.error });
      return;
    }
    if (workerSettings.length > 0) await this.replaceWorkers(workerSettings);

    const error = describeReloadProblems(
      newTemplateProblems(problemsBefore, outcome.published.problems),
      newFailures(previous.upstreams, upstreams),
    );
    const warnings = unchangeable.map((key) => `"${key}" changes on restart only; the running value stays`);
    this.recordReload({ ok: error === undefined, applied: true, error, warnings });
    const tableVersion = outcome.published.message.tableVersion;
    this.log.info({ tableVersion, ok: error === undefined }, 'config reloaded');
    if (error !== undefined) this.log.warn({ tableVersion }, `config reloaded with problems: ${error}`);
  }

  /** Back to the config and upstreams that still serve, after a reload that could not be published. */
  private restore(previous: { config: GatewayConfig; upstreams: UpstreamRegistry }): void {
    this.config = previous.config;
    this.breakers.setSettings(previous.config.circuitBreaker);
    this.log.level = previous.config.logLevel;
    this.upstreams = previous.upstreams;
    // The reload aborted their first discovery; upstreams it left pending would hold readiness forever.
    if (!previous.upstreams.allSettled()) {
      const discovery = new AbortController();
      this.discovery = discovery;
      void previous.upstreams.discoverAll(discoverUpstream, previous.config.discovery, this.log, discovery.signal);
    }
    this.refreshHealth();
  }

  private recordReload(result: { ok: boolean; applied: boolean; error?: string; warnings?: string[] }): void {
    const status: ReloadStatus = {
      version: this.publisher.current?.message.tableVersion ?? null,
      at: new Date().toISOString(),
      ok: result.ok,
      applied: result.applied,
    };
    if (result.error !== undefined) status.error = result.error;
    if (result.warnings && result.warnings.length > 0) status.warnings = result.warnings;
    this.lastReload = status;
    this.metrics.setExtra('lastReload', status);
    this.refreshHealth();
  }

  /** One slot at a time, so the others keep serving while each successor starts. */
  private async replaceWorkers(reason: readonly string[]): Promise<void> {
    this.log.info({ settings: reason }, 'replacing workers to apply settings read at worker start');
    for (const slot of this.supervisor.slots) {
      if (this.shuttingDown) return;
      if (!(await this.supervisor.replace(slot, this.config.timeouts.shutdownGraceMs))) {
        this.log.warn({ slot: slot.index }, 'the replacement worker exited before it was ready');
      }
    }
  }

  /** The single path by which a table reaches the workers: startup, discovery, and reloads. */
  private publish(): Promise<PublishOutcome> {
    return this.publisher.publish({ config: this.config, upstreams: this.upstreams });
  }

  private onPublished(published: Published): void {
    this.metrics.setExtra('tableVersion', published.message.tableVersion);
    this.supervisor.broadcast(published.message);
    this.refreshHealth();
  }

  /** A new worker gets the current state: table, health (latched readiness included), metrics. */
  private onHello(slot: WorkerSlot): void {
    const worker = slot.worker;
    if (!worker) return;
    this.metrics.setWorkerCount(this.supervisor.liveWorkers().length);
    const published = this.publisher.current;
    if (published) this.supervisor.send(worker, published.message);
    if (this.health) this.supervisor.send(worker, this.health);
    this.supervisor.send(worker, this.metrics.latest());
    this.refreshHealth();
  }

  private onWorkerMessage(slot: WorkerSlot, message: SupervisorEvents['message'][1]): void {
    const worker = slot.worker;
    if (!worker) return;
    switch (message.type) {
      case 'listening':
        if (this.announcedPort) break;
        this.announcedPort = true;
        this.log.info({ host: this.config.host, port: message.port }, 'gateway listening');
        break;
      case 'breakers':
        this.breakers.report(worker.id, message.circuits);
        this.metrics.touch();
        break;
      case 'ready':
        slot.tableVersion = message.tableVersion;
        slot.listeners = message.listeners;
        this.log.debug({ worker: worker.id, tableVersion: message.tableVersion }, 'worker ready');
        this.refreshHealth();
        break;
    }
  }

  private onWorkerExit(slot: WorkerSlot, workerId: number): void {
    this.metrics.workerGone(workerId);
    this.breakers.workerGone(workerId);
    this.metrics.setWorkerCount(this.supervisor.liveWorkers().length);
    if (!this.shuttingDown) this.metrics.setExtra('workerRestarts', ++this.restarts);
    this.refreshHealth();
  }

  /** Re-renders the health report, latches readiness, and pushes the report when it changed. */
  private refreshHealth(): void {
    const slots = this.supervisor.slots;
    const listeners = listenerStates(this.config.accessLog.enabled ? [ACCESS_LOG_LISTENER] : [], slots);
    const published = this.publisher.current;
    if (
      !this.operational &&
      isOperational({
        slots,
        tableVersion: published?.message.tableVersion ?? null,
        tableComplete: published?.complete ?? false,
        listeners,
        middleware: NO_MIDDLEWARE,
      })
    ) {
      this.operational = true;
      this.log.info({ tableVersion: published?.message.tableVersion }, 'gateway operational');
    }
    const body = JSON.stringify(
      healthReport({ listeners, middleware: NO_MIDDLEWARE, upstreams: this.upstreams.health(), reload: this.lastReload }),
    );
    const status = this.operational ? 200 : 503;
    if (this.health && this.health.body === body && this.health.status === status) return;
    this.health = { type: 'health', status, body };
    this.supervisor.broadcast(this.health);
  }

  private async shutdown(signal: NodeJS.Signals): Promise<void> {
    if (this.shuttingDown) return;
    this.shuttingDown = true;
    const graceMs = this.config.timeouts.shutdownGraceMs;
    this.log.info({ signal, graceMs }, 'shutting down: workers stop accepting and finish in-flight requests');
    this.discovery.abort();
    this.rediscovery?.stop();
    await this.supervisor.stop(graceMs);
    this.metrics.stop();
    await Promise.allSettled([this.publisher.close(), this.examples?.stop()]);
    this.log.info('gateway stopped');
    this.exitWith(0);
  }
}
