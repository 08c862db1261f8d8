import { isLeaseBatch, type LeaseBatchMessage } from '../stores/lease-messages.js';

/**
 * At most this many messages wait for the end of the turn. A worker accepting a burst of connections
 * runs all their requests in one poll phase, and a take races the store's slaMs (100 ms by default):
 * with no bound, or 32, an acquire waited for a whole burst's requests and its grant for the next
 * burst, and under CPU contention many takes passed their SLA and were let through (onStoreError
 * allow; test/cluster/cluster-lease-batch.test.ts with 3 busy loops beside it: 4-36 of 60 keys over
 * their limit in 4 runs against 0-7 unbatched). At 8: 0 in 4 runs, and most of the saving kept.
 */
export const MAX_BATCH = 8;

/**
 * The lease messages of one IPC channel (a worker to the primary's bank, or the bank to one worker)
 * sent in one event-loop turn, as one message. node:cluster serializes and writes every send on its
 * own (a JSON.stringify and a write to the channel here, a 'message' event and a JSON.parse there),
 * and a worker meeting many new rate-limit keys sends an acquire per key and gets a grant per key.
 *
 * The batch leaves in setImmediate: after every socket callback of the current poll phase, so a busy
 * worker's messages of one turn share one write and a lone message leaves at the end of its turn (no
 * timer), or sooner once MAX_BATCH are queued. Order on the channel is kept; see
 * docs/reference/stores.md for the figures.
 */
export class LeaseOutbox<M> {
  private queue: M[] = [];
  private scheduled: NodeJS.Immediate | null = null;
  private readonly flushNow = (): void => this.flush();

  constructor(private readonly deliver: (message: M | LeaseBatchMessage<M>) => void) {}

  push(message: M): void {
    if (this.queue.push(message) >= MAX_BATCH) this.flush();
    else this.scheduled ??= setImmediate(this.flushNow);
  }

  /** Sends what is queued now (a worker about to exit calls it after its last release). */
  flush(): void {
    if (this.scheduled !== null) {
      clearImmediate(this.scheduled);
      this.scheduled = null;
    }
    const queue = this.queue;
    if (queue.length === 0) return;
    this.queue = [];
    this.deliver(queue.length === 1 ? queue[0]! : { type: 'lease-batch', messages: queue });
  }

  /** The other end is gone: what is queued is dropped. */
  drop(): void {
    if (this.scheduled !== null) clearImmediate(this.scheduled);
    this.scheduled = null;
    this.queue = [];
  }
}

/**
 * The receiving end of an outbox: hands `message` to `deliver` when `is` accepts it, or each message of
 * a batch that `is` accepts, in order. False when it is neither (another kind of IPC message).
 */
export function receiveLeases<M>(message: unknown, is: (value: unknown) => value is M, deliver: (message: M) => void): boolean {
  if (is(message)) {
    deliver(message);
    return true;
  }
  if (!isLeaseBatch(message)) return false;
  for (const one of message.messages) if (is(one)) deliver(one);
  return true;
}
