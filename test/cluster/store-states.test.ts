// The primary's view of the stores over its workers (src/cluster/store-states.ts) and the lines it
// logs for a change (src/cluster/store-log.ts): the reason is that of a worker in the state logged,
// never another worker's old error; a back line carries none; a reason that changes while a store
// stays down is logged once.
import t from 'tap';
import type { Logger } from '../../src/log.js';
import type { StoreSnapshot } from '../../src/stores/config.js';
import { StoreStates } from '../../src/cluster/store-states.js';
import { logStoreChanges } from '../../src/cluster/store-log.js';

const NAMES = ['local', 'r'];

function redis(state: string, reason: string | null, lastError: string | null = reason): Record<string, StoreSnapshot> {
  return {
    local: { type: 'local', state: 'ready', lastError: null },
    r: { type: 'redis', url: 'redis://127.0.0.1:6379/0', state: state as StoreSnapshot['state'], lastError, reason },
  };
}

interface Logged {
  level: string;
  fields: Record<string, unknown>;
  msg: string;
}

function recorder(): Logger & { lines: Logged[] } {
  const lines: Logged[] = [];
  const at = (level: string) => (fields: Record<string, unknown>, msg: string) => void lines.push({ level, fields, msg });
  return { lines, info: at('info'), warn: at('warn'), error: at('error'), debug: at('debug') } as unknown as Logger & { lines: Logged[] };
}

/** One report from a worker, and the lines of the store `r` it makes the primary log. */
function report(states: StoreStates, log: Logger & { lines: Logged[] }, worker: number, stores: Record<string, StoreSnapshot>): Logged[] {
  const before = log.lines.length;
  states.report(worker, stores);
  logStoreChanges(log, states.changes(NAMES));
  return log.lines.slice(before).filter((l) => l.fields.store === 'r');
}

t.test("a store down on one worker: the reason is that worker's, not another worker's old error", async (t) => {
  const states = new StoreStates();
  const log = recorder();
  report(states, log, 1, redis('ready', null));
  report(states, log, 2, redis('ready', null));
  // Worker 2 saw READONLY a while ago and is ready; worker 1 now finds Redis frozen.
  report(states, log, 2, redis('ready', null, 'EVALSHA: READONLY You can\'t write against a read only replica.'));
  const [down] = report(states, log, 1, redis('down', 'EVALSHA timed out after 45 ms'));
  t.match(down, { level: 'warn', msg: 'store "r" is down: EVALSHA timed out after 45 ms', fields: { state: 'down', previous: 'ready', reason: 'EVALSHA timed out after 45 ms' } });
  t.match(states.health(NAMES).r, { state: 'down', reason: 'EVALSHA timed out after 45 ms', lastError: 'EVALSHA timed out after 45 ms', readyWorkers: 1, workers: 2 });

  const [back] = report(states, log, 1, redis('ready', null, 'EVALSHA timed out after 45 ms'));
  t.match(back, { level: 'info', msg: 'store "r" is back', fields: { state: 'ready', previous: 'down' } });
  t.notOk('reason' in back!.fields, 'a back line carries no reason');
  t.notOk('reason' in states.health(NAMES).r!, 'nor does a ready store in the health report');
});

t.test('a store a stopping worker closed is logged as closed (info), not as down', async (t) => {
  const states = new StoreStates();
  const log = recorder();
  report(states, log, 1, redis('ready', null));
  const [closed] = report(states, log, 1, redis('down', 'closed'));
  t.match(closed, { level: 'info', msg: 'store "r" is closed', fields: { state: 'down', previous: 'ready', reason: 'closed' } });
  const [down] = report(states, log, 1, redis('down', 'connection: connect ECONNREFUSED 127.0.0.1:6379'));
  t.match(down, { level: 'warn', msg: 'store "r" is still down: connection: connect ECONNREFUSED 127.0.0.1:6379' });
});

t.test('a reason that changes while the store stays down is logged once; the same one with other numbers is not', async (t) => {
  const states = new StoreStates();
  const log = recorder();
  report(states, log, 1, redis('ready', null));
  t.match(report(states, log, 1, redis('down', 'connection: connect ECONNREFUSED 127.0.0.1:6379')), [{ msg: 'store "r" is down: connection: connect ECONNREFUSED 127.0.0.1:6379' }]);
  t.same(report(states, log, 1, redis('down', 'connection: connect ECONNREFUSED 127.0.0.1:6379')), [], 'the same reason: nothing');
  const wrongPass = 'connection: WRONGPASS invalid username-password pair or user is disabled.';
  t.match(report(states, log, 1, redis('down', wrongPass)), [{ level: 'warn', msg: `store "r" is still down: ${wrongPass}`, fields: { state: 'down', previous: 'down', reason: wrongPass } }]);
  t.same(report(states, log, 1, redis('down', wrongPass)), [], 'logged once');
  t.same(report(states, log, 1, redis('down', 'connection: connect ECONNREFUSED 127.0.0.1:6379')), [], 'a reason of this spell already logged: not again');
  t.same(report(states, log, 1, redis('down', 'EVALSHA timed out after 45 ms')).length, 1);
  t.same(report(states, log, 1, redis('down', 'EVALSHA timed out after 12 ms')), [], 'the same reason with another number: not again');
  t.match(report(states, log, 1, redis('ready', null)), [{ msg: 'store "r" is back' }]);
  t.match(report(states, log, 1, redis('down', 'connection: connect ECONNREFUSED 127.0.0.1:6379')), [{ msg: /^store "r" is down: / }], 'a new spell logs its reason again');
});

t.test('failing: a warning with the error reply, worse than connecting and better than down; one line per spell whatever the script', async (t) => {
  const states = new StoreStates();
  const log = recorder();
  report(states, log, 1, redis('ready', null));
  report(states, log, 2, redis('ready', null));
  const reply = (sha: string) => `EVALSHA: READONLY You can't write against a read only replica. script: ${sha}, on @user_script:71.`;
  t.match(report(states, log, 1, redis('failing', reply('12470eee'))), [{ level: 'warn', msg: `store "r" answers with errors: ${reply('12470eee')}`, fields: { state: 'failing', reason: reply('12470eee') } }]);
  t.same(report(states, log, 2, redis('failing', reply('1ce0e1e7').replace('EVALSHA', 'SET'))), [], 'the same error reply to another command: not again');
  t.equal(states.health(NAMES).r!.state, 'failing');
  t.match(report(states, log, 2, redis('down', 'PING timed out after 50 ms')), [{ msg: 'store "r" is down: PING timed out after 50 ms' }]);
  t.match(states.metrics(NAMES).r, { state: 'down', readyWorkers: 0 });
});
