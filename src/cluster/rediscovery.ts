import type { GatewayConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import type { DiscoverFn, UpstreamRecord, UpstreamRegistry } from './discovered-upstreams.js';

export interface RediscoveryOptions {
  registry: UpstreamRegistry;
  discovery: GatewayConfig['discovery'];
  discover: DiscoverFn;
  log: Logger;
  /**
   * After one or more upstreams were fetched again (those that finish within COALESCE_MS of each
   * other make one call); `changed` says whether any one's endpoints or doc changed.
   */
  onRefreshed: (changed: boolean) => void;
}

/** Results that arrive this close together make one table build rather than one each. */
const COALESCE_MS = 10;

/**
 * Re-fetches the doc of every settled, non-static upstream of one registry every
 * `discovery.refreshIntervalMs` (0: never). Each upstream has its own timer, running from the end of
 * its own fetch (retries included): the fetches of one upstream never overlap however slow it is,
 * and a slow one (a doc endpoint that hangs until fetchTimeoutMs, retries) never holds back another's
 * change. A registry replaced by a reload gets a new Rediscovery; stop() the old one first, so nothing
 * it fetched late can touch the registry it no longer owns.
 */
export class Rediscovery {
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly controller = new AbortController();
  private coalesce: NodeJS.Timeout | null = null;
  private changedSince = false;

  constructor(private readonly options: RediscoveryOptions) {}

  start(): this {
    // Static upstreams have no doc to fetch.
    for (const record of this.options.registry.records) if (record.config.serviceType !== 'static') this.schedule(record);
    return this;
  }

  stop(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    if (this.coalesce) clearTimeout(this.coalesce);
    this.coalesce = null;
    this.controller.abort();
  }

  private schedule(record: UpstreamRecord): void {
    const intervalMs = this.options.discovery.refreshIntervalMs;
    if (intervalMs <= 0 || this.controller.signal.aborted) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      void this.refresh(record);
    }, intervalMs);
    timer.unref();
    this.timers.add(timer);
  }

  private async refresh(record: UpstreamRecord): Promise<void> {
    const { registry, discovery, discover, log } = this.options;
    const { fetchTimeoutMs, retries, backoffMs } = discovery;
    const signal = this.controller.signal;
    // A pending upstream is still in its first discovery: it is looked at again after the interval.
    if (record.state !== 'pending') {
      try {
        const changed = await registry.refresh(record, discover, { fetchTimeoutMs, retries, backoffMs, signal }, log);
        if (!signal.aborted) this.refreshed(changed);
      } catch (err) {
        // Nothing here may throw in the primary; the next fetch tries again.
        log.error({ err, upstream: record.config.serviceLocation }, 'upstream re-discovery failed');
      }
    }
    this.schedule(record);
  }

  private refreshed(changed: boolean): void {
    this.changedSince ||= changed;
    if (this.coalesce !== null) return;
    this.coalesce = setTimeout(() => {
      this.coalesce = null;
      const any = this.changedSince;
      this.changedSince = false;
      if (!this.controller.signal.aborted) this.options.onRefreshed(any);
    }, COALESCE_MS);
    this.coalesce.unref();
  }
}
