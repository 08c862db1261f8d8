import type { GatewayConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import type { Published, PublishOutcome, PublishState } from './publisher.js';
import { describeReloadProblems, fetchedFailures, newTemplateProblems } from './reload-problems.js';
import { UpstreamRegistry, type DiscoverFn, type UpstreamRecord } from './discovered-upstreams.js';
import { keepRestartOnlyTls } from '../edge/reload.js';

/** Settings a running gateway cannot change: the listening socket and the number of workers. */
export const RESTART_ONLY = ['port', 'host', 'workers', 'admin'] as const;

/** Settings a worker reads once, when it starts: a reload that changes them replaces the workers. */
export const WORKER_START = ['name', 'trustedProxies', 'encodedSlashes', 'timeouts', 'limits', 'circuitBreaker', 'upstreamWeighting', 'upstreamPool', 'accessLog', 'websocket', 'requestId', 'tracing'] as const;

/**
 * Settings a reload applies to the running workers: logLevel, paths, metrics and tls (certificates and
 * HSTS; its ports are restart-only, keepRestartOnlyTls) as a worker applies the published config;
 * upstreams, discovery, kvStores, middleware and listeners with the new table and components. Every
 * top-level setting is in exactly one of RESTART_ONLY, WORKER_START and this list
 * (test/cluster/reload-settings.test.ts), so a new one cannot be left out of a reload unnoticed.
 */
export const APPLIED_LIVE = ['logLevel', 'tls', 'paths', 'upstreams', 'discovery', 'kvStores', 'middleware', 'listeners', 'metrics'] as const;

function changed<K extends keyof GatewayConfig>(keys: readonly K[], before: GatewayConfig, after: GatewayConfig): K[] {
  return keys.filter((key) => JSON.stringify(before[key]) !== JSON.stringify(after[key]));
}

/**
 * Port 0 in the file means "a free port, picked at start": the port the running gateway picked is
 * that, so a reload of the same file changes nothing (tls.port 0 likewise: src/edge/reload.ts).
 */
function keepPickedPorts(current: GatewayConfig, next: GatewayConfig): GatewayConfig {
  let kept = next;
  if (next.port === 0) kept = { ...kept, port: current.port };
  if (next.admin?.port === 0 && current.admin !== undefined) kept = { ...kept, admin: { ...next.admin, port: current.admin.port } };
  return kept;
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** What a reload became; see ReloadStatus in the health module. */
export interface ReloadResult {
  ok: boolean;
  applied: boolean;
  error?: string;
  warnings?: string[];
}

/** What became of replacing workers: `replaced` are the slots whose new worker took over. */
export type WorkerReplacement = { ok: true; replaced: number[] } | { ok: false; error: string; replaced: number[] };

/** The part of the Publisher a reload needs. */
export interface PublishTarget {
  readonly current: Published | null;
  publish(state: PublishState): Promise<PublishOutcome>;
}

export interface ReloaderOptions {
  log: Logger;
  /** The config file, named in the reload log lines. */
  file: string;
  /** The config loaded at start. */
  config: GatewayConfig;
  /** Reads the config file again (command-line overrides applied); throws a ConfigError when it does not load. */
  load: () => GatewayConfig;
  discover: DiscoverFn;
  publisher: PublishTarget;
  /**
   * Starts new workers, one slot at a time, so they read the settings a worker reads only at start
   * (all slots, or only `slots`). Stops at the first slot whose new worker does not take over.
   */
  replaceWorkers: (settings: readonly string[], slots: readonly number[] | null) => Promise<WorkerReplacement>;
  /** Something the health report shows changed: an upstream settled, or the serving state was swapped. */
  onChanged: () => void;
  /** A reload's config and upstreams now serve for good: re-discovery must follow them. */
  onApplied: () => void;
  /** A reload reached an outcome (one stopped by shutdown reaches none). */
  onOutcome: (result: ReloadResult) => void;
  /**
   * Checks that a port a reload moves to is not held by another process (see port-probe.ts): null when
   * free, else the line that refuses the reload. Default: no check.
   */
  probePort?: (host: string, port: number, what: string) => Promise<string | null>;
  /** First delay before a failed publish is tried again (doubling up to PUBLISH_RETRY_MAX_MS); default 1000. */
  publishRetryMs?: number;
}

/** A failed publish is tried again at most this far apart. */
const PUBLISH_RETRY_MAX_MS = 30_000;

/** A config with its upstreams, and the discovery that settles them. */
interface State {
  config: GatewayConfig;
  upstreams: UpstreamRegistry;
  discovery: AbortController;
}

/**
 * Owns the config and upstreams that serve, and changes them on SIGHUP.
 *
 * The discovery of the registry that serves is never aborted by a reload (only by stop(), or once a
 * reload has replaced that registry for good): a reload that is refused or rolled back
 * leaves the serving upstreams exactly as they were, their discovery still running, so none stays
 * `pending` for good. A reload discovers its new and changed upstreams in a registry of its own (the
 * candidate); unchanged ones take their state over at the swap, a pending one following the discovery
 * still running for it. Reloads run one at a time and are not aborted by a SIGHUP; SIGHUPs that
 * arrive during one collapse into one more run.
 */
export class Reloader {
  private serving: State;
  /** The candidate discovery of the reload in progress, aborted by a newer SIGHUP. */
  private candidateDiscovery: AbortController | null = null;
  private running: Promise<void> | null = null;
  /** A SIGHUP came while a reload ran: the file may have changed again, so read it once more after. */
  private again = false;
  private stopped = false;
  /** The last publish failed: the workers may hold a table older than the serving state. */
  private publishFailed = false;
  private publishRetry: NodeJS.Timeout | null = null;
  private publishRetryMs: number;

  constructor(private readonly options: ReloaderOptions) {
    this.publishRetryMs = options.publishRetryMs ?? 1000;
    this.serving = this.watch({ config: options.config, upstreams: new UpstreamRegistry(options.config.upstreams), discovery: new AbortController() });
  }

  get config(): GatewayConfig {
    return this.serving.config;
  }

  get upstreams(): UpstreamRegistry {
    return this.serving.upstreams;
  }

  /** Whether a reload is in progress. */
  get reloading(): boolean {
    return this.running !== null;
  }

  /** Starts the first discovery of every upstream; each one that settles is published at once. */
  start(): void {
    this.discover(this.serving);
    void this.publish();
  }

  /**
   * Compiles the serving state and hands it to the workers. A publish that fails is tried again later
   * (1 s, doubling up to 30 s, until one succeeds): an upstream that settled must not stay out of the
   * table, and out of readiness, because one compile failed.
   */
  publish(): Promise<PublishOutcome> {
    const outcome = this.options.publisher.publish({ config: this.serving.config, upstreams: this.serving.upstreams });
    void outcome.then((result) => {
      this.publishFailed = !result.ok;
      if (result.ok) this.publishRetryMs = this.options.publishRetryMs ?? 1000;
      else this.retryPublish();
    });
    return outcome;
  }

  private retryPublish(): void {
    if (this.publishRetry || this.stopped) return;
    const delayMs = this.publishRetryMs;
    this.publishRetryMs = Math.min(delayMs * 2, PUBLISH_RETRY_MAX_MS);
    this.options.log.warn({ retryInMs: delayMs }, 'the serving state will be published again');
    this.publishRetry = setTimeout(() => {
      this.publishRetry = null;
      if (this.publishFailed && !this.stopped) void this.publish();
    }, delayMs);
    this.publishRetry.unref();
  }

  /** SIGHUP. */
  sighup(): void {
    if (this.stopped) return;
    if (this.running) {
      // Not aborted: the running reload waits only on its new and changed upstreams (bounded by their
      // discovery settings), so it finishes; this one runs once after it, however many SIGHUPs came.
      this.again = true;
      return;
    }
    this.running = this.reloadWhileAsked().finally(() => {
      this.running = null;
    });
  }

  /** Resolves once no reload runs (at once if none does). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  /** Shutdown: every discovery stops, a reload in progress records nothing. */
  stop(): void {
    this.stopped = true;
    if (this.publishRetry) clearTimeout(this.publishRetry);
    this.serving.discovery.abort();
    this.candidateDiscovery?.abort();
  }

  private async reloadWhileAsked(): Promise<void> {
    try {
      do {
        this.again = false;
        await this.reload();
      } while (this.again && !this.stopped);
    } catch (err) {
      this.options.log.error({ err }, 'config reload failed unexpectedly; the current config keeps serving');
    }
  }

  /** Publishes the serving state each time one of its upstreams settles. */
  private watch(state: State): State {
    state.upstreams.on('settled', () => {
      if (state.upstreams !== this.serving.upstreams || this.stopped) return;
      this.options.onChanged();
      void this.publish();
    });
    return state;
  }

  private discover(state: State): Promise<void> {
    return state.upstreams.discoverAll(this.options.discover, state.config.discovery, this.options.log, state.discovery.signal);
  }

  /**
   * A config that does not load is refused and the current one keeps serving. A good one has its new
   * and changed upstreams discovered off to the side (unchanged ready ones are taken over as they
   * are), is compiled on the compile thread, then swapped in through publish(); workers swap tables
   * between requests, so none is dropped.
   */
  private async reload(): Promise<void> {
    const { log } = this.options;
    let next: GatewayConfig;
    try {
      next = this.options.load();
    } catch (err) {
      const error = describe(err);
      log.error({ file: this.options.file }, `config reload refused, the current config keeps serving: ${error}`);
      this.options.onOutcome({ ok: false, applied: false, error });
      return;
    }
    const current = this.serving.config;
    next = keepPickedPorts(current, next);
    const held = await this.heldPort(current, next);
    if (held !== null) {
      log.error({ file: this.options.file }, `config reload refused, the current config keeps serving: ${held}`);
      this.options.onOutcome({ ok: false, applied: false, error: held });
      return;
    }
    const kept = keepRestartOnlyTls(current, next);
    next = kept.config;
    const unchangeable = [...changed(RESTART_ONLY, current, next), ...kept.changed];
    if (unchangeable.length > 0) log.warn({ settings: unchangeable }, 'these settings change on restart only; their current values stay');
    for (const key of RESTART_ONLY) next = { ...next, [key]: current[key] };

    const candidate = this.watch({ config: next, upstreams: new UpstreamRegistry(next.upstreams), discovery: new AbortController() });
    const unchanged = candidate.upstreams.unchangedFrom(this.serving.upstreams);
    log.info(
      { file: this.options.file, upstreams: next.upstreams.length, fetching: next.upstreams.length - unchanged.size },
      'config reload: discovering new and changed upstreams',
    );
    this.candidateDiscovery = candidate.discovery;
    try {
      await candidate.upstreams.discoverAll(this.options.discover, next.discovery, log, candidate.discovery.signal, unchanged);
    } finally {
      this.candidateDiscovery = null;
    }
    // Shutting down.
    if (candidate.discovery.signal.aborted || this.stopped) return;
    await this.apply(candidate, unchangeable, unchanged);
  }

  /**
   * A port the new config moves to that another process holds: the gateway could not start on this
   * config, so the reload is refused as a start would be. The ports this gateway holds itself (the
   * current public, TLS and admin ports) are never probed: a config that only moves among them (swaps
   * `port` and `admin.port`) would start once this gateway has stopped, and its restart-only settings
   * are only warned about.
   */
  private async heldPort(current: GatewayConfig, next: GatewayConfig): Promise<string | null> {
    const probe = this.options.probePort;
    if (!probe) return null;
    // With tls.plainPort "off" the public port is not opened.
    const publicPort = current.tls?.plainPort === 'off' ? undefined : current.port;
    const ours = new Set([publicPort, current.tls?.port, current.admin?.port].filter((port) => port !== undefined));
    const foreign = (port: number | undefined): port is number => port !== undefined && port !== 0 && !ours.has(port);
    if (foreign(next.port)) {
      const held = await probe(next.host, next.port, 'port');
      if (held !== null) return held;
    }
    if (foreign(next.tls?.port)) {
      const held = await probe(next.host, next.tls.port, 'TLS port');
      if (held !== null) return held;
    }
    const admin = next.admin;
    if (admin !== undefined && foreign(admin.port)) return probe(admin.host, admin.port, 'admin port');
    return null;
  }

  private async apply(candidate: State, unchangeable: readonly string[], unchanged: ReadonlyMap<UpstreamRecord, UpstreamRecord>): Promise<void> {
    const { log } = this.options;
    const previous = this.serving;
    const problemsBefore = this.options.publisher.current?.problems ?? [];
    const workerSettings = changed(WORKER_START, previous.config, candidate.config);
    // Unchanged upstreams as they are now: ready, failed (left to re-discovery) or still pending.
    const followed = candidate.upstreams.inherit(previous.upstreams, unchanged, candidate.discovery.signal);
    this.swapTo(candidate);
    const outcome = await this.publish();
    if (this.stopped) return;
    if (!outcome.ok) {
      const restored = await this.restore(previous);
      const error = restored.ok ? outcome.error : `${outcome.error}; ${restored.error}`;
      log.error(`config reload failed, the current config keeps serving: ${error}`);
      this.options.onOutcome({ ok: false, applied: false, error });
      return;
    }
    if (workerSettings.length > 0) {
      log.info({ settings: workerSettings }, 'replacing workers to apply settings read at worker start');
      const replaced = await this.options.replaceWorkers(workerSettings, null);
      if (this.stopped) return;
      if (!replaced.ok) return this.rollBack(previous, workerSettings, replaced);
    }

    // Applied for good: the previous registry's discoveries serve nobody now, but those the new one follows.
    previous.upstreams.abortFetchesExcept(followed);
    this.options.onApplied();
    if (candidate.config.discovery.refreshIntervalMs <= 0) this.retryFailed(candidate, unchanged);
    const error = describeReloadProblems(
      newTemplateProblems(problemsBefore, outcome.published.problems),
      fetchedFailures(candidate.upstreams, unchanged),
    );
    const warnings = unchangeable.map((key) => `"${key}" changes on restart only; the running value stays`);
    this.options.onOutcome({ ok: error === undefined, applied: true, error, warnings });
    const tableVersion = outcome.published.message.tableVersion;
    log.info({ tableVersion, ok: error === undefined }, 'config reloaded');
    if (error !== undefined) log.warn({ tableVersion }, `config reloaded with problems: ${error}`);
  }

  /**
   * With re-discovery off nothing else would fetch an unchanged upstream that failed again, so an
   * applied reload does, in the background: the reload did not wait for it and its status does not
   * count it. One that answers now is published as soon as it does.
   */
  private retryFailed(state: State, unchanged: ReadonlyMap<UpstreamRecord, UpstreamRecord>): void {
    const { fetchTimeoutMs, retries, backoffMs } = state.config.discovery;
    const options = { fetchTimeoutMs, retries, backoffMs, signal: state.discovery.signal };
    for (const record of state.upstreams.records) {
      if (!unchanged.has(record) || record.state !== 'failed' || record.config.serviceType === 'static') continue;
      void state.upstreams.refresh(record, this.options.discover, options, this.options.log).then(
        (changed) => {
          if (!changed || state !== this.serving || this.stopped) return;
          this.options.onChanged();
          void this.publish();
        },
        (err: unknown) => this.options.log.error({ err, upstream: record.config.serviceLocation }, 'upstream discovery failed unexpectedly'),
      );
    }
  }

  /**
   * A new worker did not take over: the whole reload is undone, so that `applied: false` always means
   * the previous config serves on every worker (and a worker that dies later is not replaced by one
   * that starts with settings that may not start at all). The previous state is published again (the
   * workers had been handed the new table), and slots that already run a new worker get one more.
   */
  private async rollBack(previous: State, settings: readonly string[], failure: { error: string; replaced: number[] }): Promise<void> {
    const { log } = this.options;
    const problems = [failure.error];
    const restored = await this.restore(previous);
    if (!restored.ok) {
      // Successors would be handed the new table again: the workers keep what they have until the retry.
      problems.push(restored.error);
      if (failure.replaced.length > 0) problems.push(`the workers of slots ${failure.replaced.join(', ')} keep the new settings until they restart`);
    } else if (failure.replaced.length > 0 && !this.stopped) {
      log.info({ slots: failure.replaced }, 'replacing the workers that had started with the new settings');
      const back = await this.options.replaceWorkers(settings, failure.replaced);
      if (!back.ok) problems.push(`the workers of slots ${failure.replaced.join(', ')} could not be started again with the previous settings (${back.error})`);
    }
    if (this.stopped) return;
    const error = `workers could not be replaced: ${problems.join('; ')}`;
    log.error(`config reload failed, the current config keeps serving: ${error}`);
    this.options.onOutcome({ ok: false, applied: false, error });
  }

  private swapTo(state: State): void {
    this.serving = state;
    this.options.log.level = state.config.logLevel;
    this.options.onChanged();
  }

  /**
   * Back to the config and upstreams that served before. Their discovery was never aborted; what it
   * settled while the reload's state was being published was not published, so publish them again.
   */
  private async restore(previous: State): Promise<{ ok: true } | { ok: false; error: string }> {
    this.swapTo(previous);
    const outcome = await this.publish();
    return outcome.ok ? { ok: true } : { ok: false, error: `the previous config could not be published again (${outcome.error})` };
  }
}
