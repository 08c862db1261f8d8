/**
 * A worker's middleware (docs/reference/middleware.md), listeners (docs/reference/listeners.md) and stores (docs/reference/stores.md), built from the
 * published config and swapped in on the running data plane when the config changes them (a SIGHUP that
 * changes an API key replaces no worker). The primary learns which are ready (built, and their store
 * answered or gave up; a listener's log file open) through `onReadiness`, for the health report.
 *
 * The `local` store is this worker's LeaseClient: one for the worker's life, talking to the primary's
 * LeaseBank. Redis stores are rebuilt only when `kvStores` changes.
 */
import type { RequestListener } from '../exchange/listener.js';
import type { GatewayConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import type { Counters } from '../metrics/counters.js';
import type { Pipeline } from '../middleware/pipeline.js';
import { buildPipeline } from '../middleware/registry.js';
import type { MiddlewareContext } from '../middleware/types.js';
import { buildListeners, type Listener } from '../listeners/registry.js';
import type { DataPlane } from '../proxy/data-plane.js';
import { RemoteCacheStore } from '../cache/remote-store.js';
import { CACHE_STORE } from '../cache/store.js';
import { RATE_LIMIT_STORE } from '../middleware/rate-limit.js';
import type { StoreKind } from '../stores/lookup.js';
import { createStores, type StoreSnapshot, type Stores } from '../stores/config.js';
import { LeaseClient } from '../stores/lease-client.js';
import type { LeaseBankMessage, LeaseWorkerMessage } from '../stores/lease-messages.js';

/** How long replaced middleware and stores stay open for decisions still in flight. */
const RETIRE_AFTER_MS = 5_000;

export interface WorkerComponentsOptions {
  counters: Counters;
  log: Logger;
  /** The set of ready middleware or listener ids changed. */
  onReadiness(): void;
  /** Sends a message to the primary's lease bank. */
  sendToBank(message: LeaseWorkerMessage): void;
  /** The built-in listeners (metrics, access log) that come before the configured ones. */
  builtinListeners(): readonly RequestListener[];
}

/** What a config change builds before anything is swapped in (see WorkerComponents.stage). */
export interface StagedComponents {
  readonly stores: { from: string; stores: Stores } | null;
  pipeline: { from: string; pipeline: Pipeline } | null;
  listeners: { from: string; listeners: readonly Listener[] } | null;
}

/** Something with an id that gets ready (a middleware, a listener). */
interface Component {
  readonly id: string;
  ready(): Promise<void>;
}

export class WorkerComponents {
  private readonly local: LeaseClient;
  private stores: Stores | null = null;
  private storesFrom = '';
  /** Built by prepare(), installed by apply(). */
  private nextStores: { from: string; stores: Stores } | null = null;
  private middlewareFrom = '';
  private listenersFrom = '';
  private pipeline: Pipeline | null = null;
  private listeners: readonly Listener[] = [];
  private readonly ready = { middleware: [] as string[], listeners: [] as string[] };

  constructor(private readonly options: WorkerComponentsOptions) {
    this.local = new LeaseClient({ send: options.sendToBank });
  }

  /** A message from the primary's lease bank. */
  receiveLease(message: LeaseBankMessage): void {
    this.local.receive(message);
  }

  /** Ids of the current middleware that are ready. */
  readyMiddleware(): string[] {
    return this.ready.middleware;
  }

  /** The configured listeners open the files they write again; resolves with the reasons of those that could not. */
  async reopenFiles(): Promise<string[]> {
    const results = await Promise.allSettled(this.listeners.map((listener) => listener.reopen?.()));
    return results.flatMap((r, i) => (r.status === 'rejected' ? [`listener "${this.listeners[i]!.id}": ${r.reason instanceof Error ? r.reason.message : String(r.reason)}`] : []));
  }

  /** Ids of the current configured listeners (the access log aside) that are ready. */
  readyListeners(): string[] {
    return this.ready.listeners;
  }

  /** Every store's state and counters (health report, /metrics). */
  storeSnapshot(): Record<string, StoreSnapshot> {
    return this.stores?.snapshot() ?? {};
  }

  /** The asynchronous part of a config change: connecting new stores. Call before apply(). */
  async prepare(config: GatewayConfig): Promise<void> {
    const from = JSON.stringify(config.kvStores);
    if (this.nextStores?.from === from) return;
    // Stores prepared for a config that was never applied serve nobody.
    if (this.nextStores !== null) void closeRemote(this.nextStores.stores);
    this.nextStores = null;
    if (from === this.storesFrom && this.stores !== null) return;
    this.nextStores = { from, stores: await createStores(config.kvStores, { local: this.local }) };
  }

  /**
   * Builds the middleware and listeners of `config` that differ from what serves now, installing nothing:
   * when one cannot be built this throws (having closed what it built) and the worker serves on as it
   * was. Call after prepare(); install the result with apply(), in the same synchronous step.
   */
  stage(config: GatewayConfig): StagedComponents {
    const { counters, log } = this.options;
    const staged: StagedComponents = { stores: this.nextStores, pipeline: null, listeners: null };
    const stores = this.nextStores?.stores ?? this.stores!;
    const warn = (message: string, fields?: Record<string, unknown>): void => log.warn(fields ?? {}, message);
    const middlewareKey = JSON.stringify(config.middleware);
    if (this.nextStores !== null || middlewareKey !== this.middlewareFrom) {
      const context: MiddlewareContext = {
        metrics: counters,
        warn,
        stores: {
          find<T>(kind: StoreKind<T>, name: string, owner: string): T | undefined {
            if (kind === RATE_LIMIT_STORE) return stores.rateLimitStore(name) as T | undefined;
            if (kind === CACHE_STORE) {
              const store = stores.keyValueStore(name);
              return (store === undefined ? undefined : new RemoteCacheStore(store, owner, () => stores.settled(name))) as T | undefined;
            }
            return undefined;
          },
          settled: (name) => stores.settled(name),
        },
      };
      staged.pipeline = { from: middlewareKey, pipeline: buildPipeline(config.middleware, context) };
    }
    const listenersKey = JSON.stringify(config.listeners);
    if (listenersKey !== this.listenersFrom) {
      try {
        staged.listeners = { from: listenersKey, listeners: buildListeners(config.listeners, { metrics: counters, warn }) };
      } catch (err) {
        void staged.pipeline?.pipeline.close();
        throw err;
      }
    }
    return staged;
  }

  /** Installs what stage() built, swapping it in on the running data plane (synchronous). */
  apply(staged: StagedComponents, dataPlane: DataPlane): void {
    if (staged.stores !== null && staged.stores === this.nextStores) {
      const previous = this.stores;
      ({ from: this.storesFrom, stores: this.stores } = staged.stores);
      this.nextStores = null;
      if (previous !== null) setTimeout(() => void closeRemote(previous), RETIRE_AFTER_MS).unref();
    }
    if (staged.pipeline !== null) {
      const { pipeline } = staged.pipeline;
      this.middlewareFrom = staged.pipeline.from;
      const previous = this.pipeline;
      this.pipeline = pipeline;
      dataPlane.setPipeline(pipeline);
      this.track('middleware', pipeline.entries, () => this.pipeline === pipeline);
      if (previous !== null) setTimeout(() => void previous.close(), RETIRE_AFTER_MS).unref();
    }
    if (staged.listeners !== null) {
      const { listeners } = staged.listeners;
      this.listenersFrom = staged.listeners.from;
      const previous = this.listeners;
      this.listeners = listeners;
      dataPlane.setListeners([...this.options.builtinListeners(), ...listeners]);
      this.track('listeners', listeners, () => this.listeners === listeners);
      for (const listener of previous) void listener.close();
    }
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.pipeline?.close(), ...this.listeners.map((listener) => listener.close())]);
    await this.stores?.close();
    this.local.close();
  }

  /** Reports each component ready once it is (or once it gave up: it then works by its fallback rule). */
  private track(kind: 'middleware' | 'listeners', components: readonly Component[], current: () => boolean): void {
    this.ready[kind] = [];
    this.options.onReadiness();
    for (const component of components) {
      const mark = (): void => {
        if (!current() || this.ready[kind].includes(component.id)) return;
        this.ready[kind] = [...this.ready[kind], component.id];
        this.options.onReadiness();
      };
      component.ready().then(mark, (err: unknown) => {
        // Never ready is no reason to hold the gateway at 503 for ever; what it cannot do is logged.
        this.options.log.error({ err, [kind]: component.id }, `${component.id} could not get ready`);
        mark();
      });
    }
  }
}

/** A replaced set of stores: its Redis connections close; the worker's LeaseClient stays. */
async function closeRemote(stores: Stores): Promise<void> {
  await Promise.allSettled([...stores.redis.values()].map((store) => store.close()));
}
