import { AggregatorRegistry, Registry, collectDefaultMetrics, type MetricObjectWithValues, type MetricValue } from 'prom-client';

/** One process's `process_*` and `nodejs_*` metrics, as prom-client's JSON (plain data: safe over IPC). */
export type ProcessSnapshot = Array<MetricObjectWithValues<MetricValue<string>>>;

/**
 * prom-client's default collectors in this process (CPU, memory, handles, event-loop lag, GC, heap
 * spaces), read as a snapshot. A worker ships its snapshot to the primary with its metrics deltas.
 */
export class ProcessMetrics {
  private readonly registry = new Registry();

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  snapshot(): Promise<ProcessSnapshot> {
    return this.registry.getMetricsAsJSON() as Promise<ProcessSnapshot>;
  }
}

/**
 * The primary's side: its own snapshot and each live worker's latest, merged the way prom-client's
 * cluster support merges them (AggregatorRegistry.aggregate: each metric's own aggregator, e.g.
 * CPU seconds, memory, handles and GC counts summed, event-loop lag averaged, versions and start
 * time taken from one process). The merged text is rendered in the background: `text` is the last one.
 */
export class ProcessMetricsMerger {
  private readonly own = new ProcessMetrics();
  private readonly workers = new Map<number, ProcessSnapshot>();
  private rendering = false;
  private again = false;
  text = '';

  /** @param onRendered called after each new text (the hub renders the exposition again). */
  constructor(private readonly onRendered: () => void = () => {}) {}

  set(workerId: number, snapshot: ProcessSnapshot): void {
    if (!Array.isArray(snapshot)) return;
    this.workers.set(workerId, conventional(snapshot));
    this.refresh();
  }

  gone(workerId: number): void {
    if (this.workers.delete(workerId)) this.refresh();
  }

  /** Renders again (coalesced: one render at a time, one more if asked meanwhile). */
  refresh(): void {
    if (this.rendering) {
      this.again = true;
      return;
    }
    this.rendering = true;
    void this.render().finally(() => {
      this.rendering = false;
      if (this.again) {
        this.again = false;
        this.refresh();
      }
    });
  }

  private async render(): Promise<void> {
    try {
      const all = [conventional(await this.own.snapshot()), ...this.workers.values()];
      // prom-client separates families with blank lines; the gateway's own exposition has none. It
      // also writes a NaN value (an event-loop figure before its first sample) as "Nan": the text
      // format's spelling is "NaN" (strict parsers and OpenMetrics refuse the other).
      const text = (await AggregatorRegistry.aggregate(all).metrics()).replace(/\n{2,}/g, '\n').replace(/ Nan$/gm, ' NaN');
      this.text = text === '' || text.endsWith('\n') ? text : `${text}\n`;
      this.onRendered();
    } catch {
      // A malformed worker snapshot: keep the last good text.
    }
  }
}

/**
 * Leaves out prom-client's gauges named like counters (nodejs_active_handles_total,
 * nodejs_active_requests_total, nodejs_active_resources_total): `_total` means a counter, and the
 * same figures are exposed by type as nodejs_active_handles{type}, nodejs_active_requests{type} and
 * nodejs_active_resources{type}, whose sum they are.
 */
function conventional(snapshot: ProcessSnapshot): ProcessSnapshot {
  return snapshot.filter((metric) => !(metric.name.endsWith('_total') && String(metric.type) === 'gauge'));
}

/**
 * A worker's side: reads its snapshot every `intervalMs` in the background; take() hands the latest
 * one to the next metrics delta (null when none is new), so shipping stays synchronous.
 */
export class ProcessMetricsSampler {
  private readonly metrics = new ProcessMetrics();
  private latest: ProcessSnapshot | null = null;
  private readonly timer: NodeJS.Timeout;

  constructor(intervalMs = 1000) {
    this.timer = setInterval(() => {
      this.metrics.snapshot().then(
        (snapshot) => (this.latest = snapshot),
        () => {},
      );
    }, intervalMs);
    this.timer.unref();
  }

  take(): ProcessSnapshot | null {
    const snapshot = this.latest;
    this.latest = null;
    return snapshot;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
