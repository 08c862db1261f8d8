/**
 * A worker's middleware (contract 9) and listeners (contract 10), built from the published config and
 * swapped in on the running data plane when the config changes them (a SIGHUP that changes an API key
 * replaces no worker). The primary learns which are ready (built, and their store answered or gave
 * up; a listener's log file open) through `onReadiness`, for the health report.
 */
import type { GatewayConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import type { Counters } from '../metrics/counters.js';
import type { Pipeline } from '../middleware/pipeline.js';
import { buildPipeline } from '../middleware/registry.js';
import { buildListeners, type Listener } from '../listeners/registry.js';
import type { DataPlane } from '../proxy/data-plane-types.js';

/** How long a replaced pipeline's middleware keep their stores open for decisions still in flight. */
const RETIRE_AFTER_MS = 5_000;

export interface WorkerComponentsOptions {
  counters: Counters;
  log: Logger;
  /** The set of ready middleware or listener ids changed. */
  onReadiness(): void;
}

/** Something with an id that gets ready (a middleware, a listener). */
interface Component {
  readonly id: string;
  ready(): Promise<void>;
}

export class WorkerComponents {
  private middlewareFrom = '';
  private listenersFrom = '';
  private pipeline: Pipeline | null = null;
  private listeners: readonly Listener[] = [];
  private readonly ready = { middleware: [] as string[], listeners: [] as string[] };

  constructor(private readonly options: WorkerComponentsOptions) {}

  /** Ids of the current middleware that are ready. */
  readyMiddleware(): string[] {
    return this.ready.middleware;
  }

  /** Ids of the current configured listeners (the access log aside) that are ready. */
  readyListeners(): string[] {
    return this.ready.listeners;
  }

  /** Builds and installs the config's middleware and listeners where they differ from what serves now. */
  apply(config: GatewayConfig, dataPlane: DataPlane): void {
    const { counters, log } = this.options;
    const context = { metrics: counters, warn: (message: string, fields?: Record<string, unknown>) => log.warn(fields ?? {}, message) };
    const middlewareKey = JSON.stringify(config.middleware);
    if (middlewareKey !== this.middlewareFrom) {
      this.middlewareFrom = middlewareKey;
      const pipeline = buildPipeline(config.middleware, context);
      const previous = this.pipeline;
      this.pipeline = pipeline;
      dataPlane.setPipeline(pipeline);
      this.track('middleware', pipeline.entries, () => this.pipeline === pipeline);
      if (previous !== null) setTimeout(() => void previous.close(), RETIRE_AFTER_MS).unref();
    }
    const listenersKey = JSON.stringify(config.listeners);
    if (listenersKey !== this.listenersFrom) {
      this.listenersFrom = listenersKey;
      const listeners = buildListeners(config.listeners, context);
      const previous = this.listeners;
      this.listeners = listeners;
      dataPlane.setListeners(listeners);
      this.track('listeners', listeners, () => this.listeners === listeners);
      for (const listener of previous) void listener.close();
    }
  }

  async close(): Promise<void> {
    await Promise.allSettled([this.pipeline?.close(), ...this.listeners.map((listener) => listener.close())]);
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
