import { pino, type Logger, type LevelWithSilent } from 'pino';
import { flushBeforeExit } from './log-exit.js';

export type Role = 'primary' | 'worker';
export type { Logger };

export interface LoggerOptions {
  role: Role;
  /** The cluster worker id; 0 for the primary. */
  workerId: number;
  level?: LevelWithSilent;
}

/**
 * The process's operational logger: JSON lines on stdout, written asynchronously (a stdout reader that
 * stalls must not stall the event loop), flushed by exitAfterLogs() before the process exits. The
 * request-rate access log has its own buffered destination (see src/listeners/access-log.ts).
 */
export function createLogger({ role, workerId, level = 'info' }: LoggerOptions): Logger {
  // minLength 1 only changes flush(cb): with 0 it calls back at once, with 1 once the write in flight
  // is done or has failed. Each line is still written as soon as it is logged.
  const destination = pino.destination({ dest: 1, sync: false, minLength: 1 });
  flushBeforeExit(destination);
  return pino({ level, base: { pid: process.pid, role, workerId } }, destination);
}

/** Used before the config (and so the level) is known. */
export function levelFromEnv(): LevelWithSilent {
  const level = process.env.GATEWAY_LOG_LEVEL;
  const known: readonly string[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
  return level && known.includes(level) ? (level as LevelWithSilent) : 'info';
}
