/**
 * The primary's view of the stores (docs/reference/stores.md): every worker reports its stores' states and counters;
 * the health report's `kvStores` shows each store's worst state over the workers (a Redis one worker
 * cannot reach is a problem to see), /metrics the summed counters.
 */
import type { StoreSnapshot } from '../stores/config.js';

export interface StoreHealth {
  type: 'local' | 'redis';
  /** redis: the URL without credentials. */
  url?: string;
  /** `ready`, `connecting` or `down`: the worst any worker reports. */
  state: string;
  /** Workers that report it ready, of those that report it. */
  readyWorkers: number;
  workers: number;
  lastError?: string;
}

const SEVERITY: Record<string, number> = { ready: 0, connecting: 1, down: 2 };

/** A store whose state (the worst over the workers) changed since the last call of changes(). */
export interface StoreChange {
  name: string;
  from: string | null;
  to: string;
  url?: string;
  reason?: string;
}

export class StoreStates {
  private readonly byWorker = new Map<number, Record<string, StoreSnapshot>>();
  private readonly lastSeen = new Map<string, string>();

  /**
   * The stores whose state changed since the last call (down, back, ready, connecting), with the last
   * error as the reason: each change is logged once, however many workers report it.
   */
  changes(names: readonly string[]): StoreChange[] {
    const out: StoreChange[] = [];
    const health = this.health(names);
    for (const name of names) {
      const entry = health[name];
      if (entry === undefined || entry.workers === 0) continue;
      const from = this.lastSeen.get(name) ?? null;
      if (from === entry.state) continue;
      this.lastSeen.set(name, entry.state);
      out.push({ name, from, to: entry.state, ...(entry.url === undefined ? {} : { url: entry.url }), ...(entry.lastError === undefined ? {} : { reason: entry.lastError }) });
    }
    return out;
  }

  report(workerId: number, stores: Record<string, StoreSnapshot>): void {
    this.byWorker.set(workerId, stores);
  }

  workerGone(workerId: number): void {
    this.byWorker.delete(workerId);
  }

  /** Per store name, for the health report; only names the current config has. */
  health(names: readonly string[]): Record<string, StoreHealth> {
    const out: Record<string, StoreHealth> = {};
    for (const name of names) {
      let entry: StoreHealth | undefined;
      for (const stores of this.byWorker.values()) {
        const snapshot = stores[name];
        if (snapshot === undefined) continue;
        entry ??= { type: snapshot.type, ...(snapshot.url === undefined ? {} : { url: snapshot.url }), state: 'ready', readyWorkers: 0, workers: 0 };
        entry.workers++;
        if (snapshot.state === 'ready') entry.readyWorkers++;
        if ((SEVERITY[snapshot.state] ?? 2) > (SEVERITY[entry.state] ?? 2)) entry.state = snapshot.state;
        if (snapshot.lastError) entry.lastError = snapshot.lastError;
      }
      out[name] = entry ?? { type: name === 'local' ? 'local' : 'redis', state: name === 'local' ? 'ready' : 'connecting', readyWorkers: 0, workers: 0 };
    }
    return out;
  }

  /** /metrics `kvStores`: state as in health, counters summed over workers. */
  metrics(names: readonly string[]): Record<string, Record<string, unknown>> {
    const health = this.health(names);
    const out: Record<string, Record<string, unknown>> = {};
    for (const name of names) {
      const totals: Record<string, number> = {};
      for (const stores of this.byWorker.values()) {
        for (const [counter, value] of Object.entries(stores[name]?.stats ?? {})) totals[counter] = (totals[counter] ?? 0) + value;
      }
      out[name] = { state: health[name]!.state, readyWorkers: health[name]!.readyWorkers, ...totals };
    }
    return out;
  }
}
