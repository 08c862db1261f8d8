// A worker's /metrics asks (src/cluster/metrics-asker.ts): requests that arrive while an ask for their
// format is on its way share its answer; each format is asked for on its own; an ask the primary does
// not answer in time resolves null, and its late answer is ignored; with no channel, null at once.
import t from 'tap';
import { MetricsAsker } from '../../src/cluster/metrics-asker.js';
import type { MetricsAskMessage } from '../../src/cluster/messages.js';

t.test('asks of one format share one message and one answer; another format is asked for apart', async (t) => {
  const sent: MetricsAskMessage[] = [];
  const asker = new MetricsAsker((message) => (sent.push(message), true), 1000);
  const [a, b, c] = [asker.ask('json'), asker.ask('json'), asker.ask('prometheus')];
  t.same(sent.map((m) => m.format), ['json', 'prometheus'], 'one message per format');
  asker.answered({ type: 'metrics-answer', id: sent[1]!.id, body: '# text\n' });
  asker.answered({ type: 'metrics-answer', id: sent[0]!.id, body: '{"workers":2}' });
  t.same(await Promise.all([a, b, c]), ['{"workers":2}', '{"workers":2}', '# text\n']);
  const d = asker.ask('json');
  t.equal(sent.length, 3, 'an ask after the answer is a new message');
  asker.answered({ type: 'metrics-answer', id: sent[2]!.id, body: null });
  t.equal(await d, null, 'a report the primary could not render');
});

t.test('no answer in time: null, the late answer ignored, the next ask goes out anew', async (t) => {
  const sent: MetricsAskMessage[] = [];
  const asker = new MetricsAsker((message) => (sent.push(message), true), 50);
  const started = Date.now();
  t.equal(await asker.ask('json'), null);
  t.ok(Date.now() - started >= 45, 'after the bound');
  asker.answered({ type: 'metrics-answer', id: sent[0]!.id, body: 'late' });
  const next = asker.ask('json');
  t.equal(sent.length, 2);
  asker.answered({ type: 'metrics-answer', id: sent[1]!.id, body: 'fresh' });
  t.equal(await next, 'fresh');
});

t.test('no channel to the primary: null at once', async (t) => {
  const asker = new MetricsAsker(() => false, 10_000);
  const started = Date.now();
  t.equal(await asker.ask('prometheus'), null);
  t.ok(Date.now() - started < 1000);
  const throwing = new MetricsAsker(() => {
    throw new Error('channel closed');
  }, 10_000);
  t.equal(await throwing.ask('json'), null, 'a send that throws too');
});
