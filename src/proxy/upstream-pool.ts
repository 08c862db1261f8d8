/**
 * One keep-alive undici Pool per upstream host (its serviceLocation), created on first use.
 */
import { Pool } from 'undici';

export interface UpstreamPoolSettings {
  /** TCP (and TLS) connect timeout. */
  connectMs: number;
  /** Most connections to one upstream from this process. */
  connectionsPerUpstream?: number;
}

const DEFAULT_CONNECTIONS = 1024;

export class UpstreamPools {
  private readonly pools = new Map<string, Pool>();

  constructor(private readonly settings: UpstreamPoolSettings) {}

  /** The pool of `upstream` (an origin such as "http://10.0.0.7:8080"). */
  get(upstream: string): Pool {
    let pool = this.pools.get(upstream);
    if (pool === undefined) {
      pool = new Pool(upstream, {
        connections: this.settings.connectionsPerUpstream ?? DEFAULT_CONNECTIONS,
        pipelining: 1,
        connect: { timeout: this.settings.connectMs },
      });
      this.pools.set(upstream, pool);
    }
    return pool;
  }

  /** Closes the pools of hosts not in `keep`; their queued and running requests finish first. */
  retain(keep: ReadonlySet<string>): void {
    for (const [upstream, pool] of this.pools) {
      if (keep.has(upstream)) continue;
      this.pools.delete(upstream);
      pool.close().catch(() => {});
    }
  }

  /** Closes every pool; after `graceMs`, whatever is still running is destroyed. */
  async close(graceMs: number): Promise<void> {
    const pools = [...this.pools.values()];
    this.pools.clear();
    let timer: NodeJS.Timeout | undefined;
    const graceful = Promise.all(pools.map((pool) => pool.close().catch(() => {})));
    const forced = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        void Promise.all(pools.map((pool) => pool.destroy().catch(() => {}))).then(() => resolve());
      }, graceMs);
      timer.unref();
    });
    await Promise.race([graceful, forced]);
    clearTimeout(timer);
  }
}
