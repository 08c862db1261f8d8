/**
 * One keep-alive UpstreamPool (src/upstream/) per upstream host (its serviceLocation) in this worker,
 * created on first use, with the config's pool settings and the host's TLS settings.
 */
import type { GatewayConfig, UpstreamConfig, UpstreamTlsConfig } from '../config/types.js';
import { UpstreamPool, type UpstreamTlsOptions } from '../upstream/pool.js';

/** What every pool of the worker shares (config: timeouts and upstreamPool). */
export interface UpstreamPoolSettings {
  /** TCP (and TLS) connect. */
  connectMs: number;
  /** The answer's head must arrive within this (queue wait included); the body may not stall longer. */
  upstreamMs: number;
  /** Most connections to one upstream from this process. */
  connections: number;
  /** Most requests waiting for a connection to one upstream. */
  maxQueue: number;
  idleTimeoutMs: number;
  maxResponseHeaderBytes: number;
}

export const POOL_DEFAULTS = {
  connections: 1024,
  maxQueue: 1024,
  idleTimeoutMs: 4000,
  maxResponseHeaderBytes: 16 * 1024,
} as const;

/** upstreams[].tls as the upstream client's TLS options (HTTP pools and the WebSocket leg alike). */
export function upstreamTlsOptions(tls: UpstreamTlsConfig): UpstreamTlsOptions {
  return { ca: tls.ca, cert: tls.cert, key: tls.key, servername: tls.serverName, rejectUnauthorized: tls.rejectUnauthorized };
}

export function poolSettings(config: GatewayConfig): UpstreamPoolSettings {
  const pool = { ...POOL_DEFAULTS, ...config.upstreamPool };
  return { connectMs: config.timeouts.connectMs, upstreamMs: config.timeouts.upstreamMs, ...pool };
}

export class UpstreamPools {
  private readonly pools = new Map<string, UpstreamPool>();
  /** TLS settings by serviceLocation, as the config says (with its files' contents). */
  private tls = new Map<string, UpstreamTlsOptions>();
  /** Their JSON, to see which ones a new config changed. */
  private tlsKeys = new Map<string, string>();
  private closed = false;

  constructor(private readonly settings: UpstreamPoolSettings) {}

  /** The pool of `upstream` (an origin such as "http://10.0.0.7:8080"). */
  get(upstream: string): UpstreamPool {
    let pool = this.pools.get(upstream);
    if (pool === undefined) {
      const s = this.settings;
      pool = new UpstreamPool({
        origin: upstream,
        connections: s.connections,
        maxQueue: s.maxQueue,
        connectTimeoutMs: s.connectMs,
        headersTimeoutMs: s.upstreamMs,
        bodyTimeoutMs: s.upstreamMs,
        idleTimeoutMs: s.idleTimeoutMs,
        maxResponseHeaderBytes: s.maxResponseHeaderBytes,
        tls: upstream.startsWith('https:') ? (this.tls.get(upstream) ?? {}) : undefined,
      });
      // A pool made after close() (a request that raced the shutdown) fails its calls with CLOSED.
      if (this.closed) void pool.close();
      else this.pools.set(upstream, pool);
    }
    return pool;
  }

  /**
   * Takes the TLS settings of `upstreams`. A host whose settings changed gets a new pool for new
   * requests; its old pool finishes what it runs and closes.
   */
  configure(upstreams: readonly UpstreamConfig[]): void {
    const tls = new Map<string, UpstreamTlsOptions>();
    const keys = new Map<string, string>();
    for (const upstream of upstreams) {
      if (upstream.tls === undefined) continue;
      const { ca, cert, key, serverName, rejectUnauthorized } = upstream.tls;
      tls.set(upstream.serviceLocation, upstreamTlsOptions(upstream.tls));
      keys.set(upstream.serviceLocation, JSON.stringify([ca, cert, key, serverName, rejectUnauthorized]));
    }
    for (const [upstream, pool] of this.pools) {
      if (keys.get(upstream) === this.tlsKeys.get(upstream)) continue;
      this.pools.delete(upstream);
      void pool.close();
    }
    this.tls = tls;
    this.tlsKeys = keys;
  }

  /** The TLS settings of `upstream` as the last configure() took them (undefined: none configured, Node's defaults). */
  tlsFor(upstream: string): UpstreamTlsOptions | undefined {
    return this.tls.get(upstream);
  }

  /** Closes the pools of hosts not in `keep`; their running requests finish first. */
  retain(keep: ReadonlySet<string>): void {
    for (const [upstream, pool] of this.pools) {
      if (keep.has(upstream)) continue;
      this.pools.delete(upstream);
      void pool.close();
    }
  }

  /** Closes every pool; after `graceMs`, whatever is still running is cut (its calls fail with CLOSED). */
  async close(graceMs: number): Promise<void> {
    this.closed = true;
    const pools = [...this.pools.values()];
    this.pools.clear();
    let timer: NodeJS.Timeout | undefined;
    const graceful = Promise.all(pools.map((pool) => pool.close()));
    // The grace timer holds the process: a call paused for a slow client keeps a socket libuv does not
    // count as active, and with an unref'd timer the process could exit with close() never settled.
    const forced = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        for (const pool of pools) pool.destroy();
        resolve();
      }, graceMs);
    });
    await Promise.race([graceful, forced]);
    clearTimeout(timer);
  }
}
