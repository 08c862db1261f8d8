// HealthPush: the health report goes to the workers only when it changed, a status change at once,
// and a burst of changes (every worker acknowledging a table) as a few pushes, the last one latest.
import t from 'tap';
import { HealthPush } from '../../src/cluster/health-push.js';
import type { HealthMessage } from '../../src/cluster/messages.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Polls `done` every 10 ms for up to 3 s: a timer fires late on a busy host. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 300 && !done(); i++) await sleep(10);
}

t.test('an unchanged report is not pushed again', async (t) => {
  const pushed: HealthMessage[] = [];
  const push = new HealthPush((m) => pushed.push(m), 20);
  push.update(503, '{"a":1}');
  push.update(503, '{"a":1}');
  t.equal(pushed.length, 1);
  await sleep(40);
  push.update(503, '{"a":1}');
  t.equal(pushed.length, 1, 'still one push');
  push.stop();
});

t.test('a burst of changes: the first at once, then the latest at the end of the interval', async (t) => {
  const pushed: HealthMessage[] = [];
  let now = 0;
  const push = new HealthPush((m) => pushed.push(m), 20, () => now);
  push.update(503, 'v0');
  for (let i = 1; i <= 64; i++) push.update(503, `v${i}`);
  t.same(pushed.map((m) => m.body), ['v0'], 'one push so far');
  t.equal(push.current?.body, 'v64', 'a worker that starts now is given the latest');
  now = 20;
  await until(() => pushed.length >= 2);
  t.same(pushed.map((m) => m.body), ['v0', 'v64'], 'the latest follows; the ones in between are skipped');
  now = 100;
  push.update(503, 'v65');
  t.same(pushed.at(-1)?.body, 'v65', 'a change after a quiet interval goes out at once');
  push.stop();
});

t.test('a change of status goes out at once, even during the interval', async (t) => {
  const pushed: HealthMessage[] = [];
  const push = new HealthPush((m) => pushed.push(m), 10_000, () => 0);
  push.update(503, 'starting');
  push.update(503, 'still starting');
  push.update(200, 'operational');
  t.same(pushed.map((m) => [m.status, m.body]), [[503, 'starting'], [200, 'operational']]);
  push.stop();
});

t.test('a report that goes with a new table is pushed at once, even during the interval', async (t) => {
  const pushed: HealthMessage[] = [];
  const push = new HealthPush((m) => pushed.push(m), 10_000, () => 0);
  push.update(200, 'upstream ready, endpoints 0');
  push.update(200, 'upstream ready, endpoints 1', true);
  t.same(pushed.map((m) => m.body), ['upstream ready, endpoints 0', 'upstream ready, endpoints 1'], 'not held back for the interval');
  push.update(200, 'a worker acknowledged');
  t.equal(pushed.length, 2, 'other changes in the interval still wait');
  push.stop();
});

t.test('a report that goes with a new table is pushed at once even when it was rendered before and is waiting', async (t) => {
  // The primary renders the report when an upstream changes and again when the table that routes it is
  // published: the second rendering is the same text, still waiting for the interval.
  const pushed: HealthMessage[] = [];
  const push = new HealthPush((m) => pushed.push(m), 10_000, () => 0);
  push.update(200, 'upstream failed');
  push.update(200, 'upstream ready');
  t.same(pushed.map((m) => m.body), ['upstream failed'], 'the change waits for the interval');
  push.update(200, 'upstream ready', true);
  t.same(pushed.map((m) => m.body), ['upstream failed', 'upstream ready'], 'pushed with the table, not after it');
  push.update(200, 'upstream ready', true);
  t.equal(pushed.length, 2, 'and not twice');
  push.stop();
});
