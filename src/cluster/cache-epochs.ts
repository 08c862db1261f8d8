/**
 * The epoch of each `local` response cache, stamped on the config the workers get: 0 for a cache id
 * first seen in this primary's life, a new number each time the id comes back after a config without
 * it. The workers' shared store is named by id and epoch (response-cache.ts), so a cache removed (or
 * renamed away) by one reload and brought back by a later one starts empty: its old entries missed
 * every invalidation made while it was gone (a PUT then), and must not be served again. An id kept
 * from one config to the next keeps its epoch, and its entries.
 */
import type { GatewayConfig } from '../config/types.js';

export class CacheEpochs {
  /** Epochs of the local caches of the config stamped last. */
  private live = new Map<string, number>();
  /** Ids seen before, for the next epoch of one that comes back. */
  private readonly seen = new Set<string>();
  private next = 1;

  stamp(config: GatewayConfig): GatewayConfig {
    const middleware = config.middleware;
    if (middleware.length === 0 && this.live.size === 0) return config;
    const live = new Map<string, number>();
    const stamped = middleware.map((entry) => {
      if (entry.type !== 'responseCache' || entry.store !== 'local') return entry;
      let epoch = this.live.get(entry.id);
      if (epoch === undefined) epoch = this.seen.has(entry.id) ? this.next++ : 0;
      this.seen.add(entry.id);
      live.set(entry.id, epoch);
      return epoch === entry.storeEpoch ? entry : { ...entry, storeEpoch: epoch };
    });
    this.live = live;
    return stamped.every((entry, i) => entry === middleware[i]) ? config : { ...config, middleware: stamped };
  }
}
