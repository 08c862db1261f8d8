import type { Logger } from '../log.js';
import type { StoreChange } from './store-states.js';

/** One log line per store state change: down (a warning, with the reason), back, ready, connecting. */
export function logStoreChanges(log: Logger, changes: readonly StoreChange[]): void {
  for (const { name, from, to, url, reason } of changes) {
    const fields = { store: name, ...(url === undefined ? {} : { url }), state: to, previous: from, ...(reason === undefined ? {} : { reason }) };
    if (to === 'down') log.warn(fields, `store "${name}" is down: ${reason ?? 'no reason given'}`);
    else if (to === 'ready' && from === 'down') log.info(fields, `store "${name}" is back`);
    else if (to === 'ready') log.info(fields, `store "${name}" is ready`);
    else log.info(fields, `store "${name}" is ${to}${reason ? ` (${reason})` : ''}`);
  }
}
