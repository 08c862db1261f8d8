import { performance } from 'node:perf_hooks';
import { AggregatorRegistry, Registry, collectDefaultMetrics, type MetricObjectWithValues, type MetricValue } from 'prom-client';

/**
 * How often each process reads its process metrics, and the primary renders them merged. A reading
 * (prom-client's collectors: /proc files, heap spaces, handles) took about 1.8 ms of a worker's main
 * thread, and each one the primary merged and rendered cost it more; at one a second this was most
 * of an idle gateway's CPU (2.6% of a core in the primary, 1.4-2.2% in each worker, `/proc` ticks over
 * 10 s). Prometheus scrapes every 15 s or more: five seconds old is fresh enough.
 */
export const PROCESS_METRICS_INTERVAL_MS = 5000;

/**
 * The event-loop lag figures sample a timer this often. prom-client's default, 10 ms, woke every
 * process of the gateway about 200 times a second (strace: epoll_pwait calls of an idle process):
 * 3.2-3.3% of a core for an idle gateway with 2 workers, against 2.2-2.25% at 20 ms (`/proc` ticks
 * over 20 s, alternated). Every stall of 20 ms or more is still seen; a shorter one only when a
 * sample falls in it.
 */
export const EVENT_LOOP_PRECISION_MS = 20;

/** One process's `process_*` and `nodejs_*` metrics, as prom-client's JSON (plain data: safe over IPC). */
export type ProcessSnapshot = Array<MetricObjectWithValues<MetricValue<string>>>;

/**
 * prom-client's default collectors in this process (CPU, memory, handles, event-loop lag, GC, heap
 * spaces), read as a snapshot. A worker ships its snapshot to the primary with its metrics deltas.
 */
export class ProcessMetrics {
  private readonly registry = new Registry();

  constructor() {
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: EVENT_LOOP_PRECISION_MS });
  }

  async snapshot(): Promise<ProcessSnapshot> {
    return beyondInterval((await this.registry.getMetricsAsJSON()) as ProcessSnapshot);
  }
}

/** The figures of monitorEventLoopDelay's histogram that are delays (its standard deviation is not). */
const SAMPLED_DELAYS: ReadonlySet<string> = new Set(['min', 'max', 'mean', 'p50', 'p90', 'p99'].map((figure) => `nodejs_eventloop_lag_${figure}_seconds`));
const INTERVAL_S = EVENT_LOOP_PRECISION_MS / 1000;

/**
 * monitorEventLoopDelay records how long after the previous one each sampling timer ran, the 20 ms
 * interval included: an idle process would show a lag of 20 ms. The delays are reported beyond the
 * interval (the interval subtracted, at least 0; prom-client 15 reports them as recorded), so an
 * idle process shows about 0 and a 30 ms stall about 30 ms.
 */
function beyondInterval(snapshot: ProcessSnapshot): ProcessSnapshot {
  return snapshot.map((metric) => {
    if (!SAMPLED_DELAYS.has(metric.name)) return metric;
    const values = metric.values.map((sample) => (Number.isFinite(sample.value) ? { ...sample, value: Math.max(0, sample.value - INTERVAL_S) } : sample));
    return { ...metric, help: `${metric.help} Beyond the ${EVENT_LOOP_PRECISION_MS} ms sampling interval.`, values };
  });
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
  /** performance.now() of the last render's start; a render waits until the interval has passed. */
  private renderedAt = Number.NEGATIVE_INFINITY;
  private timer: NodeJS.Timeout | null = null;
  text = '';

  /**
   * @param onRendered called after each new text (the hub renders the exposition again).
   * @param intervalMs renders are at least this far apart (a worker that joins or leaves is rendered at once).
   */
  constructor(
    private readonly onRendered: () => void = () => {},
    private readonly intervalMs = PROCESS_METRICS_INTERVAL_MS,
  ) {}

  set(workerId: number, snapshot: ProcessSnapshot): void {
    if (!Array.isArray(snapshot)) return;
    const joined = !this.workers.has(workerId);
    this.workers.set(workerId, conventional(snapshot));
    this.refresh(joined);
  }

  gone(workerId: number): void {
    if (this.workers.delete(workerId)) this.refresh(true);
  }

  /**
   * Renders again: at once when `now` (or when nothing was rendered for intervalMs), else once the
   * interval has passed since the last render. Coalesced: one render at a time, one more if asked meanwhile.
   */
  refresh(now = false): void {
    if (this.rendering) {
      this.again = true;
      return;
    }
    const wait = this.renderedAt + this.intervalMs - performance.now();
    if (!now && wait > 0) {
      this.timer ??= setTimeout(() => {
        this.timer = null;
        this.refresh(true);
      }, wait);
      this.timer.unref();
      return;
    }
    if (this.timer !== null) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.rendering = true;
    this.renderedAt = performance.now();
    void this.render().finally(() => {
      this.rendering = false;
      if (this.again) {
        this.again = false;
        this.refresh();
      }
    });
  }

  /** No render is waiting any more (the primary stops). */
  stop(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
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
 * A worker's side: reads its snapshot at start and then every `intervalMs` in the background; take()
 * hands the latest one to the next metrics delta (null when none is new), so shipping stays synchronous.
 */
export class ProcessMetricsSampler {
  private readonly metrics = new ProcessMetrics();
  private latest: ProcessSnapshot | null = null;
  private readonly timer: NodeJS.Timeout;

  constructor(intervalMs = PROCESS_METRICS_INTERVAL_MS) {
    const sample = (): void => {
      this.metrics.snapshot().then(
        (snapshot) => (this.latest = snapshot),
        () => {},
      );
    };
    // The first at once: a new worker's figures join the sums within a second, not an interval.
    sample();
    this.timer = setInterval(sample, intervalMs);
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
