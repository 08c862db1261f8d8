import { EventEmitter } from 'node:events';
import type { GatewayConfig, UpstreamConfig } from '../config/types.js';
import type { UpstreamHealth, UpstreamState } from '../builtins/healthcheck.js';
import type { TemplateProblem } from '../routing/types.js';
import type { DiscoveredUpstream, DiscoveryOptions } from '../discovery/index.js';
import type { Logger } from '../log.js';
import type { UpstreamWeight } from '../proxy/data-plane-types.js';

export type DiscoverFn = (upstream: UpstreamConfig, options: DiscoveryOptions) => Promise<DiscoveredUpstream>;

export interface UpstreamRecord {
  readonly config: UpstreamConfig;
  state: UpstreamState;
  discovered: DiscoveredUpstream | null;
  lastError?: string;
  /** Endpoints that made it into the published table (entries minus template problems). */
  endpoints: number;
}

export interface UpstreamRegistryEvents {
  settled: [record: UpstreamRecord];
}

function reasonOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Discovers every configured upstream concurrently: each goes pending → ready | failed on its own,
 * so a slow or dead upstream never holds back the others.
 */
export class UpstreamRegistry extends EventEmitter<UpstreamRegistryEvents> {
  readonly records: UpstreamRecord[];

  constructor(upstreams: readonly UpstreamConfig[]) {
    super();
    this.records = upstreams.map((config) => ({ config, state: 'pending', discovered: null, endpoints: 0 }));
  }

  discoverAll(discover: DiscoverFn, discovery: GatewayConfig['discovery'], log: Logger, signal: AbortSignal): Promise<void> {
    const { fetchTimeoutMs, retries, backoffMs } = discovery;
    return Promise.all(
      this.records.map(async (record) => {
        const { serviceLocation, serviceType } = record.config;
        try {
          record.discovered = await discover(record.config, { fetchTimeoutMs, retries, backoffMs, signal });
          record.state = 'ready';
          delete record.lastError;
          log.info({ upstream: serviceLocation, serviceType, entries: record.discovered.entries.length }, 'upstream discovered');
        } catch (err) {
          if (signal.aborted) return;
          record.state = 'failed';
          record.lastError = reasonOf(err);
          log.error({ upstream: serviceLocation, serviceType, reason: record.lastError }, 'upstream discovery failed');
        }
        this.emit('settled', record);
      }),
    ).then(() => undefined);
  }

  allSettled(): boolean {
    return this.records.every((record) => record.state !== 'pending');
  }

  /** The upstreams whose discovery succeeded, in config order. */
  ready(): DiscoveredUpstream[] {
    return this.records.flatMap((record) => (record.state === 'ready' && record.discovered ? [record.discovered] : []));
  }

  /** Endpoints each upstream contributes to a compiled table: its entries less the rejected templates. */
  countEndpoints(problems: readonly TemplateProblem[]): void {
    for (const record of this.records) {
      const entries = record.state === 'ready' && record.discovered ? record.discovered.entries.length : 0;
      const rejected = problems.filter((p) => p.upstream === record.config.serviceLocation).length;
      record.endpoints = Math.max(0, entries - rejected);
    }
  }

  health(): UpstreamHealth[] {
    return this.records.map(({ config, state, endpoints, lastError }) => ({
      serviceType: config.serviceType,
      serviceLocation: config.serviceLocation,
      weight: config.weight,
      state,
      endpoints,
      ...(lastError === undefined ? {} : { lastError }),
    }));
  }

  weights(): UpstreamWeight[] {
    return this.records.map(({ config }) => ({ serviceLocation: config.serviceLocation, weight: config.weight }));
  }
}
