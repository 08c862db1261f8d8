import type { LeaseBatchMessage } from '../stores/lease-messages.js';

/**
 * The lease messages of one IPC channel (a worker to the primary's bank, or the bank to one worker)
 * sent in one event-loop turn, as one message. node:cluster serializes and writes every send on its
 * own (a JSON.stringify and a write to the channel here, a 'message' event and a JSON.parse there),
 * and a worker meeting many new rate-limit keys sends an acquire per key and gets a grant per key.
 *
 * The batch leaves in setImmediate: after every socket callback of the current poll phase, so a busy
 * worker's messages of one turn share one write and a lone message leaves at the end of its turn (no
 * timer, no added wait). Order on the channel is kept; see docs/reference/stores.md for the figures.
 */
export class LeaseOutbox<M> {
  private queue: M[] = [];
  private scheduled: NodeJS.Immediate | null = null;
  private readonly flushNow = (): void => this.flush();

  constructor(private readonly deliver: (message: M | LeaseBatchMessage<M>) => void) {}

  push(message: M): void {
    this.queue.push(message);
    this.scheduled ??= setImmediate(this.flushNow);
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
