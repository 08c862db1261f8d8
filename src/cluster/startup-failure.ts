import type { Logger } from '../log.js';

/**
 * A start that cannot go on: the reason as readable text on stderr (the same text `gateway routes`
 * prints for a config it cannot load), and as a JSON log line on stdout for log collectors.
 */
export function reportStartupFailure(log: Logger, text: string, fields: Record<string, unknown> = {}): void {
  log.error(fields, text);
  process.stderr.write(`gateway start: ${text}\n`);
}
