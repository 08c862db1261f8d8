/**
 * The primary's view of the circuit breakers. Each worker keeps its own breakers (the decision per
 * request is local: no IPC on the request path) and reports its circuits whenever they change. The hub
 * adds up the consecutive failures every worker counted for a host (or host + endpoint); once the sum
 * reaches the threshold it tells every worker to open that breaker. A host therefore trips after about
 * `threshold` failures in all, a report's round trip late, instead of up to N x threshold with N
 * workers each counting alone. Closing stays local: each worker's own trial request decides.
 *
 * It also renders the `breakers` field of /metrics.
 */
import type { BreakerSettings, BreakerStateName, CircuitReport } from '../proxy/upstream-breakers.js';

export interface BreakerTrip {
  upstream: string;
  endpoint: string | null;
}

/** /metrics `breakers`: per host, with its host+endpoint breakers that are not closed. */
export type BreakersReport = Record<
  string,
  { state: BreakerStateName; failures: number; endpoints: Record<string, { state: BreakerStateName; failures: number }> }
>;

const SEVERITY: Record<BreakerStateName, number> = { closed: 0, 'half-open': 1, open: 2 };

function keyOf(upstream: string, endpoint: string | null): string {
  return endpoint === null ? upstream : `${upstream}\n${endpoint}`;
}

export class BreakerHub {
  private readonly byWorker = new Map<number, CircuitReport[]>();
  /** Circuits the hub tripped whose summed failures have not dropped below the threshold since. */
  private readonly tripped = new Set<string>();

  /** @param settings the serving config's (a reload may change them) */
  constructor(
    private readonly settings: () => BreakerSettings,
    private readonly trip: (trip: BreakerTrip) => void,
    private readonly now: () => number = Date.now,
  ) {}

  /** A worker's circuits, replacing what it reported before. */
  report(workerId: number, circuits: CircuitReport[]): void {
    this.byWorker.set(workerId, circuits);
    this.evaluate();
  }

  /** Its counts no longer add up: it serves nothing. */
  workerGone(workerId: number): void {
    if (this.byWorker.delete(workerId)) this.evaluate();
  }

  private evaluate(): void {
    const sums = new Map<string, { upstream: string; endpoint: string | null; failures: number }>();
    for (const circuits of this.byWorker.values()) {
      for (const c of circuits) {
        const key = keyOf(c.upstream, c.endpoint);
        const sum = sums.get(key);
        if (sum === undefined) sums.set(key, { upstream: c.upstream, endpoint: c.endpoint, failures: c.failures });
        else sum.failures += c.failures;
      }
    }
    for (const key of this.tripped) {
      const sum = sums.get(key);
      if (sum === undefined || sum.failures < this.threshold(sum.endpoint)) this.tripped.delete(key);
    }
    for (const [key, sum] of sums) {
      if (this.tripped.has(key) || sum.failures < this.threshold(sum.endpoint)) continue;
      this.tripped.add(key);
      this.trip({ upstream: sum.upstream, endpoint: sum.endpoint });
    }
  }

  private threshold(endpoint: string | null): number {
    const settings = this.settings();
    return endpoint === null ? settings.hostFailures : settings.endpointFailures;
  }

  /** Merged over workers: the worst state, the summed failures; an open one past resetMs shows half-open. */
  summary(): BreakersReport {
    const out: BreakersReport = {};
    const now = this.now();
    const resetMs = this.settings().resetMs;
    const hostOf = (upstream: string) => (out[upstream] ??= { state: 'closed', failures: 0, endpoints: {} });
    for (const circuits of this.byWorker.values()) {
      for (const c of circuits) {
        const state: BreakerStateName = c.state === 'open' && now - c.since >= resetMs ? 'half-open' : c.state;
        const host = hostOf(c.upstream);
        const target = c.endpoint === null ? host : (host.endpoints[c.endpoint] ??= { state: 'closed', failures: 0 });
        target.failures += c.failures;
        if (SEVERITY[state] > SEVERITY[target.state]) target.state = state;
      }
    }
    for (const host of Object.values(out)) {
      for (const [endpoint, circuit] of Object.entries(host.endpoints)) if (circuit.state === 'closed') delete host.endpoints[endpoint];
    }
    return Object.fromEntries(Object.keys(out).sort().map((upstream) => [upstream, out[upstream]!]));
  }
}
