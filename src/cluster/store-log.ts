import type { Logger } from '../log.js';
import type { StoreChange } from './store-states.js';

/**
 * One log line per store state change: down or failing (a warning, with the reason; again, once, when
 * the reason changes while it lasts), back, ready, connecting, closed by the gateway (info).
 */
export function logStoreChanges(log: Logger, changes: readonly StoreChange[]): void {
  for (const { name, from, to, url, reason } of changes) {
    const fields = { store: name, ...(url === undefined ? {} : { url }), state: to, previous: from, ...(reason === undefined ? {} : { reason }) };
    const why = reason ?? 'no reason given';
    // A worker that stops closes its connections: its store is "down" for the reason "closed", which
    // is no failure (a warning there would fire at every deploy and stop).
    if (to === 'down' && reason === 'closed') log.info(fields, `store "${name}" is closed`);
    else if (to === 'down') log.warn(fields, from === 'down' ? `store "${name}" is still down: ${why}` : `store "${name}" is down: ${why}`);
    else if (to === 'failing') log.warn(fields, from === 'failing' ? `store "${name}" still answers with errors: ${why}` : `store "${name}" answers with errors: ${why}`);
    else if (to === 'ready' && (from === 'down' || from === 'failing')) log.info(fields, `store "${name}" is back`);
    else if (to === 'ready') log.info(fields, `store "${name}" is ready`);
    else log.info(fields, `store "${name}" is ${to}${reason ? ` (${reason})` : ''}`);
  }
}
