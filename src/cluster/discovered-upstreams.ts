import { EventEmitter, getMaxListeners, setMaxListeners } from 'node:events';
import type { GatewayConfig, UpstreamConfig } from '../config/types.js';
import type { UpstreamHealth, UpstreamState } from '../builtins/healthcheck.js';
import type { TemplateProblem } from '../routing/types.js';
import { docsEqual, entriesEqual, type DiscoveredUpstream, type DiscoveryOptions, type EndpointProblem } from '../discovery/index.js';
import type { Logger } from '../log.js';
import type { UpstreamWeight } from '../lifecycle/forward.js';

export type DiscoverFn = (upstream: UpstreamConfig, options: DiscoveryOptions) => Promise<DiscoveredUpstream>;

export interface UpstreamRecord {
  readonly config: UpstreamConfig;
  state: UpstreamState;
  discovered: DiscoveredUpstream | null;
  lastError?: string;
  /** Endpoints that made it into the published table (entries minus template problems). */
  endpoints: number;
  /** Its endpoints the last compiled table left out (templates the router refused). */
  leftOut?: readonly TemplateProblem[];
}

/** The health report and the log list this many problems per upstream, and count the rest. */
export const MAX_SHOWN_PROBLEMS = 50;

/** Problems, bounded for the health report and the log: `problemsOmitted` counts the rest. */
export function shownProblems(problems: readonly EndpointProblem[]): { problems?: EndpointProblem[]; problemsOmitted?: number } {
  if (problems.length === 0) return {};
  const shown = problems.slice(0, MAX_SHOWN_PROBLEMS);
  return problems.length > shown.length ? { problems: shown, problemsOmitted: problems.length - shown.length } : { problems: shown };
}

function problemsKey(discovered: DiscoveredUpstream | null): string {
  return JSON.stringify(discovered?.problems ?? []);
}

/** Once per discovery that found them (not at every re-discovery that finds the same). */
function logDocProblems(log: Logger, upstream: UpstreamConfig, problems: readonly EndpointProblem[]): void {
  if (problems.length === 0) return;
  const noun = problems.length === 1 ? 'problem' : 'problems';
  // A static upstream's are its config endpoints' (templates that route other than they say).
  const what = upstream.serviceType === 'static' ? `upstream's endpoints have` : 'upstream doc has';
  log.warn({ upstream: upstream.serviceLocation, ...shownProblems(problems) }, `${what} ${problems.length} ${noun}; its endpoints are routed all the same`);
}

export interface UpstreamRegistryEvents {
  settled: [record: UpstreamRecord];
}

function reasonOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Same place and shape of doc: a weight change alone needs no re-fetch. */
function sameSource(a: UpstreamConfig, b: UpstreamConfig): boolean {
  return (
    a.serviceType === b.serviceType &&
    a.serviceLocation === b.serviceLocation &&
    a.specPath === b.specPath &&
    JSON.stringify(a.endpoints) === JSON.stringify(b.endpoints)
  );
}

/** What one record learned, onto another (the same upstream in the registry that replaces it). */
function copyState(from: UpstreamRecord, to: UpstreamRecord): void {
  to.state = from.state;
  to.discovered = from.discovered ? { ...from.discovered, upstream: to.config } : null;
  to.endpoints = from.endpoints;
  if (from.lastError === undefined) delete to.lastError;
  else to.lastError = from.lastError;
}

/**
 * Discovers every configured upstream concurrently: each goes pending → ready | failed on its own,
 * so a slow or dead upstream never holds back the others.
 */
export class UpstreamRegistry extends EventEmitter<UpstreamRegistryEvents> {
  readonly records: UpstreamRecord[];
  /** How to abort each discovery in flight: its own, or the one of a replaced registry it follows. */
  private readonly fetches = new Map<UpstreamRecord, () => void>();

  constructor(upstreams: readonly UpstreamConfig[]) {
    super();
    this.records = upstreams.map((config) => ({ config, state: 'pending', discovered: null, endpoints: 0 }));
  }

  /**
   * Pairs each of this registry's upstreams whose doc source is the same in `previous` with its record
   * there (a new `weight` alone is the same source). Those are not fetched by a reload: they take over
   * their state from `previous` when the reload swaps in (inherit()), whatever it is then.
   */
  unchangedFrom(previous: UpstreamRegistry): Map<UpstreamRecord, UpstreamRecord> {
    const pairs = new Map<UpstreamRecord, UpstreamRecord>();
    for (const record of this.records) {
      const old = previous.records.find((r) => r.config.serviceLocation === record.config.serviceLocation);
      if (old && sameSource(old.config, record.config)) pairs.set(record, old);
    }
    return pairs;
  }

  /**
   * Takes over the current state of each paired upstream of `previous` (ready with its endpoints,
   * failed with its lastError, or pending). One still pending follows the discovery that `previous`
   * runs for it, not started again: it settles here when it settles there. `signal` (this registry's
   * discovery) aborting stops that discovery too. Returns the records of `previous` followed so.
   */
  inherit(previous: UpstreamRegistry, pairs: ReadonlyMap<UpstreamRecord, UpstreamRecord>, signal: AbortSignal): Set<UpstreamRecord> {
    const followed = new Set<UpstreamRecord>();
    for (const [record, old] of pairs) {
      copyState(old, record);
      if (old.state !== 'pending') continue;
      followed.add(old);
      const onSettled = (settled: UpstreamRecord): void => {
        if (settled !== old) return;
        previous.off('settled', onSettled);
        this.fetches.delete(record);
        if (signal.aborted || record.state !== 'pending') return;
        copyState(old, record);
        this.emit('settled', record);
      };
      previous.on('settled', onSettled);
      const stop = (): void => previous.abortFetch(old);
      this.fetches.set(record, stop);
      signal.addEventListener('abort', stop, { once: true });
    }
    return followed;
  }

  /** Aborts the discovery of one upstream (its own, or the one it follows). */
  abortFetch(record: UpstreamRecord): void {
    this.fetches.get(record)?.();
  }

  /** Aborts every discovery of this registry but those of `keep` (followed by the registry that replaced it). */
  abortFetchesExcept(keep: ReadonlySet<UpstreamRecord>): void {
    for (const record of this.records) if (!keep.has(record)) this.abortFetch(record);
  }

  /**
   * Discovers every upstream still pending, but those of `skip` (a reload's unchanged upstreams, which
   * inherit their state instead).
   */
  discoverAll(
    discover: DiscoverFn,
    discovery: GatewayConfig['discovery'],
    log: Logger,
    signal: AbortSignal,
    skip: ReadonlySet<UpstreamRecord> | ReadonlyMap<UpstreamRecord, unknown> = new Set(),
  ): Promise<void> {
    const { fetchTimeoutMs, retries, backoffMs } = discovery;
    const pending = this.records.filter((record) => record.state === 'pending' && !skip.has(record));
    // One abort listener per upstream being discovered, each removed when its discovery ends: more than
    // Node's default of 10 is no leak (it printed MaxListenersExceededWarning at the start of a
    // gateway with more than 10 upstreams).
    if (pending.length > 0) setMaxListeners(Math.max(getMaxListeners(signal), pending.length + 10), signal);
    return Promise.all(
      pending.map(async (record) => {
        const { serviceLocation, serviceType } = record.config;
        // Its own controller: a reload that replaces this registry may abort all but the followed ones.
        const own = new AbortController();
        const stop = (): void => own.abort();
        if (signal.aborted) own.abort();
        else signal.addEventListener('abort', stop, { once: true });
        this.fetches.set(record, stop);
        try {
          record.discovered = await discover(record.config, { fetchTimeoutMs, retries, backoffMs, signal: own.signal });
          record.state = 'ready';
          delete record.lastError;
          log.info({ upstream: serviceLocation, serviceType, entries: record.discovered.entries.length }, 'upstream discovered');
          logDocProblems(log, record.config, record.discovered.problems ?? []);
        } catch (err) {
          if (own.signal.aborted) return;
          record.state = 'failed';
          record.lastError = reasonOf(err);
          log.error({ upstream: serviceLocation, serviceType, reason: record.lastError }, 'upstream discovery failed');
        } finally {
          signal.removeEventListener('abort', stop);
          if (this.fetches.get(record) === stop) this.fetches.delete(record);
        }
        this.emit('settled', record);
      }),
    ).then(() => undefined);
  }

  /**
   * Fetches a settled upstream's doc again. A failed upstream that answers becomes ready; a ready one
   * that no longer answers keeps its last known endpoints, with `lastError` saying why. Resolves true
   * when what the upstream routes or documents changed (the table must be published again).
   */
  async refresh(record: UpstreamRecord, discover: DiscoverFn, options: DiscoveryOptions, log: Logger): Promise<boolean> {
    const { serviceLocation } = record.config;
    let fresh: DiscoveredUpstream;
    try {
      // The last doc read: one that comes back unchanged is not read again.
      fresh = await discover(record.config, record.discovered ? { ...options, previous: record.discovered } : options);
    } catch (err) {
      if (options.signal?.aborted) return false;
      const reason = reasonOf(err);
      if (record.lastError !== reason) {
        const keeps = record.state === 'ready' ? 'its last known endpoints stay routed' : 'it stays failed';
        log.warn({ upstream: serviceLocation, reason }, `upstream re-discovery failed; ${keeps}`);
      }
      record.lastError = reason;
      return false;
    }
    if (options.signal?.aborted) return false;
    const previous = record.discovered;
    const wasReady = record.state === 'ready';
    const previousError = record.lastError;
    record.state = 'ready';
    record.discovered = fresh;
    delete record.lastError;
    if (wasReady && previousError !== undefined) log.info({ upstream: serviceLocation, previousError }, 'upstream doc answers again');
    if (problemsKey(previous) !== problemsKey(fresh)) {
      if ((fresh.problems ?? []).length > 0) logDocProblems(log, record.config, fresh.problems ?? []);
      else log.info({ upstream: serviceLocation }, 'upstream doc has no problems any more');
    }
    if (!wasReady || !previous) {
      log.info({ upstream: serviceLocation, entries: fresh.entries.length, ...(previousError === undefined ? {} : { previousError }) }, 'upstream discovered on re-discovery');
      return true;
    }
    if (fresh.entries === previous.entries && fresh.doc === previous.doc) {
      log.debug({ upstream: serviceLocation }, 'upstream doc unchanged (304, or the same bytes): not read again');
      return false;
    }
    const sameEntries = entriesEqual(previous.entries, fresh.entries);
    if (sameEntries && docsEqual(previous.doc, fresh.doc)) return false;
    log.info(
      { upstream: serviceLocation, entries: fresh.entries.length, endpointsChanged: !sameEntries },
      'upstream doc changed on re-discovery',
    );
    return true;
  }

  allSettled(): boolean {
    return this.records.every((record) => record.state !== 'pending');
  }

  /** How many upstreams have no endpoints in the table: discovery pending, or failed. */
  undiscovered(): number {
    return this.records.filter((record) => record.state !== 'ready').length;
  }

  /** The upstreams whose discovery succeeded, in config order. */
  ready(): DiscoveredUpstream[] {
    return this.records.flatMap((record) => (record.state === 'ready' && record.discovered ? [record.discovered] : []));
  }

  /** Endpoints each upstream contributes to a compiled table: its entries less the rejected templates. */
  countEndpoints(problems: readonly TemplateProblem[]): void {
    for (const record of this.records) {
      const entries = record.state === 'ready' && record.discovered ? record.discovered.entries.length : 0;
      const rejected = problems.filter((p) => p.upstream === record.config.serviceLocation);
      record.endpoints = Math.max(0, entries - rejected.length);
      record.leftOut = record.state === 'ready' ? rejected : [];
    }
  }

  health(): UpstreamHealth[] {
    return this.records.map(({ config, state, endpoints, lastError, leftOut, discovered }) => ({
      serviceType: config.serviceType,
      serviceLocation: config.serviceLocation,
      weight: config.weight,
      state,
      endpoints,
      ...(lastError === undefined ? {} : { lastError }),
      ...shownProblems([
        ...(leftOut ?? []).map((p) => ({ method: p.method, path: p.template, reason: `left out: ${p.reason}` })),
        ...(discovered?.problems ?? []),
      ]),
    }));
  }

  weights(): UpstreamWeight[] {
    return this.records.map(({ config }) => ({ serviceLocation: config.serviceLocation, weight: config.weight }));
  }
}
