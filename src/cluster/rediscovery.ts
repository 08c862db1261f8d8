import type { GatewayConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import type { DiscoverFn, UpstreamRegistry } from './discovered-upstreams.js';

export interface RediscoveryOptions {
  registry: UpstreamRegistry;
  discovery: GatewayConfig['discovery'];
  discover: DiscoverFn;
  log: Logger;
  /** After each sweep; `changed` says whether any upstream's endpoints or doc changed. */
  onSwept: (changed: boolean) => void;
}

/**
 * Re-fetches the doc of every settled, non-static upstream of one registry every
 * `discovery.refreshIntervalMs` (0: never). The interval runs from the end of a sweep, so sweeps never
 * overlap however slow an upstream is. A registry replaced by a reload gets a new Rediscovery; stop()
 * the old one first, so nothing it fetched late can touch the registry it no longer owns.
 */
export class Rediscovery {
  private timer: NodeJS.Timeout | null = null;
  private readonly controller = new AbortController();

  constructor(private readonly options: RediscoveryOptions) {}

  start(): this {
    this.schedule();
    return this;
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.controller.abort();
  }

  private schedule(): void {
    const intervalMs = this.options.discovery.refreshIntervalMs;
    if (intervalMs <= 0 || this.controller.signal.aborted) return;
    this.timer = setTimeout(() => void this.sweep(), intervalMs);
    this.timer.unref();
  }

  private async sweep(): Promise<void> {
    this.timer = null;
    const { registry, discovery, discover, log, onSwept } = this.options;
    const { fetchTimeoutMs, retries, backoffMs } = discovery;
    const signal = this.controller.signal;
    try {
      // Pending upstreams are still in their first discovery; static ones have no doc to fetch.
      const due = registry.records.filter((record) => record.state !== 'pending' && record.config.serviceType !== 'static');
      const changes = await Promise.all(
        due.map((record) => registry.refresh(record, discover, { fetchTimeoutMs, retries, backoffMs, signal }, log)),
      );
      if (!signal.aborted) onSwept(changes.some(Boolean));
    } catch (err) {
      // Nothing here may throw in the primary; the next sweep tries again.
      log.error({ err }, 'upstream re-discovery sweep failed');
    }
    this.schedule();
  }
}
