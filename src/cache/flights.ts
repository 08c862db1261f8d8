/**
 * Request coalescing: while one request for a key (the leader) is on its way to the upstream, others
 * that miss on the same key (followers) wait for its outcome instead of going upstream too. Each
 * follower waits at most its own deadline (the cache's slaMs); then it goes on without the leader.
 */
import type { ContentAnswer } from '../exchange/answer.js';

export interface FlightOutcome {
  /** The leader's answer was stored: look again. */
  readonly stored: boolean;
  /** The upstream failed and the leader was served this stale entry: serve it too. */
  readonly stale: ContentAnswer | null;
}

type Waiter = (outcome: FlightOutcome | null) => void;

export class Flight {
  private waiters: Waiter[] | null = [];

  constructor(
    private readonly flights: Flights,
    readonly key: string,
  ) {}

  /** Resolves with the leader's outcome, or null after `timeoutMs` (or if the flight is over). */
  wait(timeoutMs: number): Promise<FlightOutcome | null> {
    const waiters = this.waiters;
    if (waiters === null || timeoutMs <= 0) return Promise.resolve(null);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        const index = waiters.indexOf(waiter);
        if (index !== -1) waiters.splice(index, 1);
        resolve(null);
      }, timeoutMs);
      const waiter: Waiter = (outcome) => {
        clearTimeout(timer);
        resolve(outcome);
      };
      waiters.push(waiter);
    });
  }

  get waiting(): number {
    return this.waiters?.length ?? 0;
  }

  /** The leader is done: wakes the followers (once; later calls do nothing). */
  land(outcome: FlightOutcome): void {
    const waiters = this.waiters;
    if (waiters === null) return;
    this.waiters = null;
    this.flights.remove(this);
    for (const waiter of waiters) waiter(outcome);
  }
}

export class Flights {
  private readonly byKey = new Map<string, Flight>();

  /** The flight in progress for `key`, if any. */
  get(key: string): Flight | undefined {
    return this.byKey.get(key);
  }

  /** Starts the flight of a new leader for `key` (none may be in progress). */
  start(key: string): Flight {
    const flight = new Flight(this, key);
    this.byKey.set(key, flight);
    return flight;
  }

  remove(flight: Flight): void {
    if (this.byKey.get(flight.key) === flight) this.byKey.delete(flight.key);
  }

  get size(): number {
    return this.byKey.size;
  }
}
