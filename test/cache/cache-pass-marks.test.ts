// The hit-for-miss marks of the response cache (src/cache/pass-marks.ts): a mark holds for its time,
// unmark ends it, and the map stays bounded.
import t from 'tap';
import { PassMarks } from '../../src/cache/pass-marks.js';

t.test('a mark holds until its time is up; unmark ends it sooner', async (t) => {
  const marks = new PassMarks(1000);
  marks.mark('GET|/a', 5000);
  t.ok(marks.has('GET|/a', 5999), 'held');
  t.notOk(marks.has('GET|/a', 6000), 'over at its time');
  t.notOk(marks.has('GET|/a', 5500), 'and gone');
  marks.mark('GET|/b', 0);
  marks.unmark('GET|/b');
  t.notOk(marks.has('GET|/b', 1), 'unmarked');
  t.notOk(marks.has('GET|/never', 0));
});

t.test('past 10,000 keys the marks are dropped, never grown', async (t) => {
  const marks = new PassMarks(60_000);
  for (let i = 0; i < 25_000; i++) marks.mark(`GET|/k${i}`, 0);
  let held = 0;
  for (let i = 0; i < 25_000; i++) if (marks.has(`GET|/k${i}`, 1)) held++;
  t.ok(held <= 10_000, `${held} marks held`);
  t.ok(marks.has('GET|/k24999', 1), 'the newest is held');
});
