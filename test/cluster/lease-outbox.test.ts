// The lease messages' transport batching (src/cluster/lease-outbox.ts): what one event-loop turn sends
// leaves as one message, in order, MAX_BATCH at most; a lone message goes as it is; flush sends at once;
// drop forgets; the receiving end hands each message on in order.
import t from 'tap';
import { LeaseOutbox, MAX_BATCH, receiveLeases } from '../../src/cluster/lease-outbox.js';
import { isLeaseBankMessage, isLeaseBatch, type LeaseBankMessage } from '../../src/stores/lease-messages.js';

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

t.test('one turn, one delivery, in order; a lone message is not wrapped', async (t) => {
  const delivered: unknown[] = [];
  const outbox = new LeaseOutbox<{ type: string; n: number }>((message) => delivered.push(message));
  for (let n = 0; n < 5; n++) outbox.push({ type: 'lease-acquire', n });
  t.equal(delivered.length, 0, 'nothing before the turn ends');
  await turn();
  t.equal(delivered.length, 1, 'one delivery');
  t.ok(isLeaseBatch(delivered[0]));
  t.same(delivered[0], { type: 'lease-batch', messages: [0, 1, 2, 3, 4].map((n) => ({ type: 'lease-acquire', n })) });
  outbox.push({ type: 'lease-release', n: 5 });
  await turn();
  t.same(delivered[1], { type: 'lease-release', n: 5 }, 'alone: as it is');
  await turn();
  t.equal(delivered.length, 2, 'nothing more');
});

t.test('flush sends what is queued at once and cancels the scheduled send; drop forgets it', async (t) => {
  const delivered: unknown[] = [];
  const outbox = new LeaseOutbox<{ type: string; n: number }>((message) => delivered.push(message));
  outbox.push({ type: 'lease-release', n: 1 });
  outbox.push({ type: 'lease-release', n: 2 });
  outbox.flush();
  t.same(delivered, [{ type: 'lease-batch', messages: [{ type: 'lease-release', n: 1 }, { type: 'lease-release', n: 2 }] }]);
  await turn();
  t.equal(delivered.length, 1, 'not sent twice');
  outbox.push({ type: 'lease-release', n: 3 });
  outbox.drop();
  await turn();
  t.equal(delivered.length, 1, 'dropped');
  outbox.push({ type: 'lease-release', n: 4 });
  await turn();
  t.same(delivered[1], { type: 'lease-release', n: 4 }, 'usable after a drop');
});

t.test(`no more than ${MAX_BATCH} wait for the end of the turn: a full batch leaves at once`, async (t) => {
  const delivered: Array<{ type: string; messages?: unknown[] }> = [];
  const outbox = new LeaseOutbox<{ type: string; n: number }>((message) => delivered.push(message as { type: string; messages?: unknown[] }));
  for (let n = 0; n < 2 * MAX_BATCH + 3; n++) outbox.push({ type: 'lease-acquire', n });
  t.same(delivered.map((m) => m.messages?.length), [MAX_BATCH, MAX_BATCH], 'two full batches before the turn ends');
  await turn();
  t.same(delivered.map((m) => m.messages?.length), [MAX_BATCH, MAX_BATCH, 3], 'the rest at its end');
  const order = delivered.flatMap((m) => (m.messages ?? [m]) as Array<{ n: number }>).map((m) => m.n);
  t.same(order, [...Array(2 * MAX_BATCH + 3).keys()], 'in order');
});

t.test('receiveLeases: a lone message or each of a batch, in order; anything else is not its business', async (t) => {
  const got: LeaseBankMessage[] = [];
  const receive = (message: unknown): boolean => receiveLeases(message, isLeaseBankMessage, (lease) => got.push(lease));
  const recall = { type: 'lease-recall', key: 'a' } as unknown as LeaseBankMessage;
  t.ok(receive(recall));
  t.same(got, [recall]);
  const sent: unknown[] = [];
  const outbox = new LeaseOutbox<unknown>((message) => sent.push(message));
  const messages = [1, 2, 3].map((n) => ({ type: 'lease-recall', key: `k${n}` }));
  for (const message of [...messages, { type: 'health' }]) outbox.push(message);
  outbox.flush();
  t.ok(receive(sent[0]), 'a batch is taken');
  t.same(got.slice(1), messages, 'its lease messages in order; what is not one is skipped');
  t.notOk(receive({ type: 'health' }), 'another message is left to the caller');
  t.equal(got.length, 4);
});
