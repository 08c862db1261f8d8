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
  /** `ready`, `connecting`, `failing` or `down`: the worst any worker reports. */
  state: string;
  /** Workers that report it ready, of those that report it. */
  readyWorkers: number;
  workers: number;
  /** The last failure of a worker in that state (else of any worker). */
  lastError?: string;
  /** Not ready: why, as a worker in that state says (what made it down, the error reply it fails with). */
  reason?: string;
}

const SEVERITY: Record<string, number> = { ready: 0, connecting: 1, failing: 2, down: 3 };

/**
 * What tells one reason from another: an error reply's code (`EVALSHA: READONLY You can't ...` and
 * `SET: READONLY ...` are one failure), else the text without its numbers (a port, a timeout's ms).
 */
export function reasonKey(reason: string): string {
  return /^[A-Z]+: ([A-Z]{2,})\b/.exec(reason)?.[1] ?? reason.replace(/\d+/g, '#');
}

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
  /** Per store: the state last logged, and the reasons logged since it began. */
  private readonly lastSeen = new Map<string, { state: string; reasons: Set<string> }>();

  /**
   * The stores whose state changed since the last call (down, failing, back, ready, connecting), with
   * the reason for any state but ready: each change is logged once, however many workers report it.
   * A store that stays down or failing for another reason is a change too (from and to the same
   * state), once per reason in that spell.
   */
  changes(names: readonly string[]): StoreChange[] {
    const out: StoreChange[] = [];
    const health = this.health(names);
    for (const name of names) {
      const entry = health[name];
      if (entry === undefined || entry.workers === 0) continue;
      const seen = this.lastSeen.get(name);
      const reason = entry.state === 'ready' ? undefined : entry.reason;
      const change: StoreChange = { name, from: seen?.state ?? null, to: entry.state, ...(entry.url === undefined ? {} : { url: entry.url }), ...(reason === undefined ? {} : { reason }) };
      if (seen?.state !== entry.state) {
        this.lastSeen.set(name, { state: entry.state, reasons: new Set(reason === undefined ? [] : [reasonKey(reason)]) });
        out.push(change);
      } else if (reason !== undefined && (entry.state === 'down' || entry.state === 'failing') && !seen.reasons.has(reasonKey(reason))) {
        seen.reasons.add(reasonKey(reason));
        out.push(change);
      }
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
      // The first worker in the worst state speaks for the store; another's error may be long past.
      let worst = -1;
      let worstError: string | null = null;
      let anyError: string | null = null;
      for (const stores of this.byWorker.values()) {
        const snapshot = stores[name];
        if (snapshot === undefined) continue;
        entry ??= { type: snapshot.type, ...(snapshot.url === undefined ? {} : { url: snapshot.url }), state: 'ready', readyWorkers: 0, workers: 0 };
        entry.workers++;
        if (snapshot.state === 'ready') entry.readyWorkers++;
        const severity = SEVERITY[snapshot.state] ?? SEVERITY.down!;
        if (severity > worst) {
          worst = severity;
          entry.state = snapshot.state;
          worstError = snapshot.lastError;
          if (snapshot.reason) entry.reason = snapshot.reason;
          else delete entry.reason;
        }
        if (snapshot.lastError) anyError = snapshot.lastError;
      }
      if (entry !== undefined) {
        const lastError = worstError ?? anyError;
        if (lastError) entry.lastError = lastError;
        if (entry.state === 'ready') delete entry.reason;
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
