/**
 * Signals that arrive while a process of the gateway starts, before its own handlers are installed.
 * Node's default for SIGHUP, SIGTERM, SIGINT, SIGQUIT and SIGUSR2 ends the process at once, with no
 * line; SIGUSR1 opens the inspector (./worker-signals.ts). A start takes a while (the bundle, the
 * config, the port probe in the primary; the modules and uWS in a worker), and a supervisor or an
 * operator may signal it meanwhile. From the first statement of the process, the signal is held here
 * instead; `release()` hands what came to the real handlers.
 */

const HELD = ['SIGHUP', 'SIGTERM', 'SIGINT', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2'] as const;
const STOPPING = new Set<NodeJS.Signals>(['SIGTERM', 'SIGINT', 'SIGQUIT']);

export interface HeldSignals {
  /** The first stop signal (SIGTERM, SIGINT, SIGQUIT) that came; null: none. */
  stop: NodeJS.Signals | null;
  /** Whether a SIGHUP came. */
  hangup: boolean;
}

const held: HeldSignals = { stop: null, hangup: false };
let holding = false;

function hold(signal: NodeJS.Signals): void {
  if (STOPPING.has(signal)) held.stop ??= signal;
  else if (signal === 'SIGHUP') held.hangup = true;
}

/** Holds the signals from now on (again a no-op while they are held). */
export function holdSignals(): void {
  if (holding) return;
  holding = true;
  for (const signal of HELD) process.on(signal, hold);
}

/** What has come so far (the signals stay held). */
export function heldSoFar(): Readonly<HeldSignals> {
  return held;
}

/**
 * Stops holding; returns what came. Called once the caller's own handlers are installed, in the same
 * synchronous step: when the last listener of a signal goes, Node stops watching it, and a signal
 * that has arrived but not yet reached JavaScript (it came during synchronous code) is lost.
 */
export function releaseSignals(): HeldSignals {
  if (holding) for (const signal of HELD) process.off(signal, hold);
  holding = false;
  return { ...held };
}
