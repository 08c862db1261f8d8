/**
 * A worker's middleware (contract 9), built from the published config and swapped in on the running
 * data plane when the config changes them (a SIGHUP that changes an API key replaces no worker). The
 * primary learns which are ready (built, and their store answered or gave up) through `onReadiness`,
 * for the health report.
 */
import type { GatewayConfig } from '../config/types.js';
import type { Logger } from '../log.js';
import type { Counters } from '../metrics/counters.js';
import type { Pipeline } from '../middleware/pipeline.js';
import { buildPipeline } from '../middleware/registry.js';
import type { DataPlane } from '../proxy/data-plane-types.js';

/** How long a replaced pipeline's middleware keep their stores open for decisions still in flight. */
const RETIRE_AFTER_MS = 5_000;

export interface WorkerComponentsOptions {
  counters: Counters;
  log: Logger;
  /** The set of ready middleware ids changed. */
  onReadiness(): void;
}

export class WorkerComponents {
  private builtFrom = '';
  private pipeline: Pipeline | null = null;
  private ready: string[] = [];

  constructor(private readonly options: WorkerComponentsOptions) {}

  /** Ids of the current middleware that are ready. */
  readyMiddleware(): string[] {
    return this.ready;
  }

  /** Builds and installs the config's middleware when they differ from what serves now. */
  apply(config: GatewayConfig, dataPlane: DataPlane): void {
    const key = JSON.stringify(config.middleware);
    if (key === this.builtFrom) return;
    this.builtFrom = key;
    const { counters, log } = this.options;
    const pipeline = buildPipeline(config.middleware, {
      metrics: counters,
      warn: (message, fields) => log.warn(fields ?? {}, message),
    });
    const previous = this.pipeline;
    this.pipeline = pipeline;
    dataPlane.setPipeline(pipeline);
    this.ready = [];
    this.options.onReadiness();
    for (const middleware of pipeline.entries) {
      void middleware.ready().then(
        () => this.markReady(pipeline, middleware.id),
        (err: unknown) => {
          // Not ready is not a reason to hold the gateway at 503 for ever: its SLA and onStoreError rule apply.
          log.warn({ err, middleware: middleware.id }, 'middleware could not get ready; it decides by its onStoreError rule');
          this.markReady(pipeline, middleware.id);
        },
      );
    }
    if (previous !== null) setTimeout(() => void previous.close(), RETIRE_AFTER_MS).unref();
  }

  async close(): Promise<void> {
    await this.pipeline?.close();
  }

  private markReady(pipeline: Pipeline, id: string): void {
    if (pipeline !== this.pipeline || this.ready.includes(id)) return;
    this.ready = [...this.ready, id];
    this.options.onReadiness();
  }
}
