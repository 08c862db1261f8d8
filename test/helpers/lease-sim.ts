/**
 * The `local` store in one process: a LeaseBank and N LeaseClients joined by message queues that
 * behave like node:cluster IPC (per-worker FIFO both ways, JSON-serialized, different workers'
 * messages interleaving in any order), on a virtual clock. Messages move only when the test says so,
 * so a test chooses every interleaving and every instant.
 */
import { LeaseBank, type LeaseBankOptions } from '../../src/stores/lease-bank.js';
import { LeaseClient, type LeaseClientOptions, type TakeResult } from '../../src/stores/lease-client.js';
import type { LeaseBankMessage, LeaseWorkerMessage } from '../../src/stores/lease-messages.js';
import type { GcraPolicy, RateDecision } from '../../src/stores/gcra.js';

export interface LeaseSimOptions {
  workers: number;
  start?: number;
  bank?: Partial<Omit<LeaseBankOptions, 'send' | 'now'>>;
  client?: Partial<Omit<LeaseClientOptions, 'send' | 'now'>>;
}

interface Link {
  toBank: LeaseWorkerMessage[];
  toWorker: LeaseBankMessage[];
  alive: boolean;
}

/** JSON round trip, as node:cluster's default serialization does; refuses what JSON would mangle. */
function overIpc<T>(message: T): T {
  const text = JSON.stringify(message, (_key, value: unknown) => {
    if (typeof value === 'number' && !Number.isFinite(value)) throw new Error(`non-finite number in IPC message: ${JSON.stringify(message)}`);
    if (value === undefined) throw new Error('undefined in IPC message');
    return value;
  });
  return JSON.parse(text) as T;
}

export class LeaseSim {
  now: number;
  readonly bank: LeaseBank;
  readonly workers: LeaseClient[] = [];
  private readonly links: Link[] = [];
  /** Messages sent each way, in total. */
  messages = 0;

  constructor(options: LeaseSimOptions) {
    this.now = options.start ?? 1_767_225_600_000;
    const clock = () => this.now;
    this.bank = new LeaseBank({
      sweepIntervalMs: 0,
      ...options.bank,
      now: clock,
      send: (workerId, message) => {
        const link = this.links[workerId]!;
        if (!link.alive) return;
        this.messages++;
        link.toWorker.push(overIpc(message));
      },
    });
    for (let w = 0; w < options.workers; w++) {
      const link: Link = { toBank: [], toWorker: [], alive: true };
      this.links.push(link);
      this.workers.push(
        new LeaseClient({
          sweepIntervalMs: 0,
          ...options.client,
          now: clock,
          send: (message) => {
            if (!link.alive) return;
            this.messages++;
            link.toBank.push(overIpc(message));
          },
        }),
      );
    }
  }

  take(worker: number, key: string, policy: GcraPolicy): TakeResult {
    return this.workers[worker]!.take(key, policy);
  }

  pending(): number {
    let n = 0;
    for (const link of this.links) n += link.toBank.length + link.toWorker.length;
    return n;
  }

  /**
   * Delivers one message: `choice` picks among the non-empty queues (two per worker: to and from the
   * bank). Returns false when nothing was pending.
   */
  deliverOne(choice = 0): boolean {
    const ready: Array<() => void> = [];
    this.links.forEach((link, w) => {
      if (link.toBank.length > 0) ready.push(() => this.bank.receive(w, link.toBank.shift()!));
      if (link.toWorker.length > 0) ready.push(() => this.workers[w]!.receive(link.toWorker.shift()!));
    });
    if (ready.length === 0) return false;
    ready[choice % ready.length]!();
    return true;
  }

  /** Delivers everything, in an order `choices` picks (cycled), or in queue order without them. */
  drain(choices: readonly number[] = []): void {
    let i = 0;
    while (this.deliverOne(choices.length === 0 ? 0 : choices[i++ % choices.length]));
  }

  /** Runs every worker's and the bank's sweep at the current instant. */
  sweep(): void {
    for (let w = 0; w < this.workers.length; w++) if (this.links[w]!.alive) this.workers[w]!.sweep();
    this.bank.sweep();
  }

  /** The worker process dies: its queues are lost and the bank is told, as the primary's 'exit' handler would. */
  kill(worker: number): void {
    const link = this.links[worker]!;
    link.alive = false;
    link.toBank.length = 0;
    link.toWorker.length = 0;
    this.bank.workerGone(worker);
  }

  close(): void {
    for (const worker of this.workers) worker.close();
    this.bank.close();
  }
}

/** Resolves a take, delivering messages in queue order until it has. */
export async function settle(sim: LeaseSim, result: TakeResult): Promise<RateDecision> {
  if (!(result instanceof Promise)) return result;
  sim.drain();
  return result;
}
