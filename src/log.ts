import { pino, type Logger, type LevelWithSilent } from 'pino';

export type Role = 'primary' | 'worker';
export type { Logger };

export interface LoggerOptions {
  role: Role;
  /** The cluster worker id; 0 for the primary. */
  workerId: number;
  level?: LevelWithSilent;
}

/**
 * The process's operational logger: JSON lines on stdout, written synchronously so that what a
 * process says right before it dies is not lost. The request-rate access log has its own buffered
 * destination (see src/listeners/access-log.ts).
 */
export function createLogger({ role, workerId, level = 'info' }: LoggerOptions): Logger {
  return pino({
    level,
    base: { pid: process.pid, role, workerId },
  });
}

/** Used before the config (and so the level) is known. */
export function levelFromEnv(): LevelWithSilent {
  const level = process.env.GATEWAY_LOG_LEVEL;
  const known: readonly string[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
  return level && known.includes(level) ? (level as LevelWithSilent) : 'info';
}
