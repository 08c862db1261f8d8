import type { ComponentStates, WorkersHealth } from '../builtins/healthcheck.js';
import type { WorkerSlot } from './supervisor.js';

/**
 * A listener (middleware) is ready once every worker slot's current process reported it ready; a
 * ready listener that a worker reports failing (the access log while it cannot write) is `failing`
 * instead, a field present only then.
 */
export function componentStates(expected: readonly string[], slots: readonly WorkerSlot[], kind: 'listeners' | 'middleware'): ComponentStates {
  const pending: string[] = [];
  const ready: string[] = [];
  const failing: string[] = [];
  for (const name of expected) {
    const everywhere = slots.every((slot) => slot.worker !== null && slot[kind].includes(name));
    if (!everywhere) pending.push(name);
    else if (kind === 'listeners' && slots.some((slot) => slot.failingListeners.includes(name))) failing.push(name);
    else ready.push(name);
  }
  return failing.length > 0 ? { pending, ready, failing } : { pending, ready };
}

export interface ReadinessInput {
  slots: readonly WorkerSlot[];
  /** Version of the newest published table, or null before the first. */
  tableVersion: number | null;
  /** That table was compiled after every upstream finished discovery (ready or failed). */
  tableComplete: boolean;
  listeners: ComponentStates;
  middleware: ComponentStates;
}

/**
 * The service becomes operational when every upstream is confirmed (its discovery finished), the
 * table holding all of them is what every worker slot listens with, and no listener or middleware
 * is pending. The caller latches the first `true`.
 */
export function isOperational({ slots, tableVersion, tableComplete, listeners, middleware }: ReadinessInput): boolean {
  return (
    tableVersion !== null &&
    tableComplete &&
    slots.length > 0 &&
    slots.every((slot) => slot.worker !== null && slot.tableVersion === tableVersion) &&
    listeners.pending.length === 0 &&
    middleware.pending.length === 0
  );
}

/** The health report's view of the worker slots: which process serves each, with which table. */
export function workerStates(slots: readonly WorkerSlot[], tableVersion: number | null): WorkersHealth {
  let serving = 0;
  const states = slots.map((slot) => {
    const ready = slot.worker !== null && slot.tableVersion !== null;
    if (ready) serving++;
    return { slot: slot.index, pid: slot.worker?.process.pid ?? null, tableVersion: ready ? slot.tableVersion : null };
  });
  return { expected: slots.length, serving, tableVersion, slots: states };
}
