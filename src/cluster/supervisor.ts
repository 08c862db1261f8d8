import cluster, { type Worker } from 'node:cluster';
import { EventEmitter } from 'node:events';
import type { Logger } from '../log.js';
import type { MetricsDelta } from '../metrics/delta.js';
import {
  isWorkerMessage,
  type HelloMessage,
  type MetricsDeltaMessage,
  type PrimaryToWorker,
  type WorkerToPrimary,
} from './messages.js';

/** One of the N worker positions; its process is replaced when it dies. */
export interface WorkerSlot {
  readonly index: number;
  worker: Worker | null;
  /** The worker said hello: it can be sent messages. */
  greeted: boolean;
  startedAt: number;
  /** Exits in a row that came soon after a start (a crash loop). */
  quickExits: number;
  respawnTimer: NodeJS.Timeout | null;
  /** The table version this slot's worker acknowledged listening with; null until it does. */
  tableVersion: number | null;
  /** Listeners the slot's worker has initialized. */
  listeners: string[];
}

export interface SupervisorOptions {
  log: Logger;
  count: number;
  /** A worker that lived at least this long before exiting is replaced at once. */
  stableAfterMs?: number;
  firstBackoffMs?: number;
  maxBackoffMs?: number;
}

export interface SupervisorEvents {
  /** The slot's new worker is up and listening for messages. */
  hello: [slot: WorkerSlot];
  message: [slot: WorkerSlot, message: Exclude<WorkerToPrimary, HelloMessage | MetricsDeltaMessage>];
  delta: [workerId: number, delta: MetricsDelta];
  exit: [slot: WorkerSlot, workerId: number];
  /** A worker that was replaced on purpose (see replace()) has exited. */
  retired: [workerId: number];
}

/** Back-off before respawning: none after one exit, then doubling while the exits come quickly. */
export function respawnDelay(quickExits: number, firstBackoffMs: number, maxBackoffMs: number): number {
  if (quickExits <= 1) return 0;
  return Math.min(firstBackoffMs * 2 ** (quickExits - 2), maxBackoffMs);
}

/**
 * Keeps `count` workers alive. A worker that exits is replaced (with back-off when it crash-loops);
 * nothing a worker does can make the primary throw.
 */
export class Supervisor extends EventEmitter<SupervisorEvents> {
  readonly slots: WorkerSlot[];
  private stopping = false;
  /** Replaced workers still draining; they are not respawned. */
  private readonly retiring = new Set<Worker>();
  private readonly log: Logger;
  private readonly stableAfterMs: number;
  private readonly firstBackoffMs: number;
  private readonly maxBackoffMs: number;

  constructor(options: SupervisorOptions) {
    super();
    this.log = options.log;
    this.stableAfterMs = options.stableAfterMs ?? 5000;
    this.firstBackoffMs = options.firstBackoffMs ?? 250;
    this.maxBackoffMs = options.maxBackoffMs ?? 30_000;
    this.slots = Array.from({ length: options.count }, (_, index) => ({
      index,
      worker: null,
      greeted: false,
      startedAt: 0,
      quickExits: 0,
      respawnTimer: null,
      tableVersion: null,
      listeners: [],
    }));
  }

  spawn(slot: WorkerSlot): void {
    if (this.stopping || slot.worker) return;
    slot.respawnTimer = null;
    this.resetSlot(slot);
    slot.startedAt = Date.now();
    let worker: Worker;
    try {
      worker = cluster.fork({ GATEWAY_WORKER_SLOT: String(slot.index) });
    } catch (err) {
      slot.quickExits++;
      const delayMs = Math.max(this.firstBackoffMs, respawnDelay(slot.quickExits, this.firstBackoffMs, this.maxBackoffMs));
      this.log.error({ err, slot: slot.index, retryInMs: delayMs }, 'could not start a worker');
      slot.respawnTimer = setTimeout(() => this.spawn(slot), delayMs);
      return;
    }
    slot.worker = worker;
    this.log.info({ workerPid: worker.process.pid, worker: worker.id, slot: slot.index }, 'worker started');
    worker.on('message', (message: unknown) => {
      if (!isWorkerMessage(message)) return;
      // A retiring worker's last requests still count.
      if (message.type === 'metrics-delta') return void this.emit('delta', worker.id, message.delta);
      if (slot.worker !== worker) return;
      if (message.type === 'hello') {
        slot.greeted = true;
        this.emit('hello', slot);
      } else this.emit('message', slot, message);
    });
    worker.on('error', (err: Error) => {
      this.log.warn({ err, worker: worker.id, slot: slot.index }, 'worker channel error');
    });
    worker.on('exit', (code: number | null, signal: string | null) => this.onExit(slot, worker, code, signal));
  }

  /** Workers that said hello and are still connected. */
  liveWorkers(): Worker[] {
    const workers: Worker[] = [];
    for (const slot of this.slots) if (slot.worker && slot.greeted && slot.worker.isConnected()) workers.push(slot.worker);
    return workers;
  }

  send(worker: Worker, message: PrimaryToWorker): void {
    if (!worker.isConnected()) return;
    try {
      worker.send(message, (err: Error | null) => {
        if (err) this.log.debug({ err, worker: worker.id }, 'message to worker not delivered');
      });
    } catch (err) {
      this.log.debug({ err, worker: worker.id }, 'message to worker not delivered');
    }
  }

  broadcast(message: PrimaryToWorker): void {
    for (const worker of this.liveWorkers()) this.send(worker, message);
  }

  /**
   * Starts a successor in the slot; once it reports ready, the predecessor stops accepting and
   * drains. Both listen on the same port meanwhile, so no connection is refused. Resolves true when
   * the successor took over, false when it exited first (it is respawned as usual, and the
   * predecessor is retired anyway so the slot never runs two workers for long).
   */
  replace(slot: WorkerSlot, graceMs: number): Promise<boolean> {
    const predecessor = slot.worker;
    if (this.stopping) return Promise.resolve(false);
    if (predecessor) {
      this.retiring.add(predecessor);
      this.resetSlot(slot);
    }
    this.spawn(slot);
    return new Promise((resolve) => {
      const settle = (tookOver: boolean): void => {
        this.off('message', onMessage);
        this.off('exit', onExit);
        if (predecessor) this.send(predecessor, { type: 'shutdown', graceMs });
        resolve(tookOver);
      };
      const onMessage = (from: WorkerSlot, message: { type: string }): void => {
        if (from === slot && message.type === 'ready') settle(true);
      };
      const onExit = (from: WorkerSlot): void => {
        if (from === slot) settle(false);
      };
      this.on('message', onMessage);
      this.on('exit', onExit);
    });
  }

  /** Ask every worker to drain and wait for them, killing any that outlast `graceMs` plus a margin. */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    for (const slot of this.slots) {
      if (slot.respawnTimer) clearTimeout(slot.respawnTimer);
      slot.respawnTimer = null;
    }
    const running = [...this.retiring, ...this.slots.flatMap((slot) => (slot.worker ? [slot.worker] : []))];
    const exited = running.map(
      (worker) => new Promise<void>((resolve) => (worker.isDead() ? resolve() : worker.once('exit', () => resolve()))),
    );
    for (const worker of this.retiring) this.send(worker, { type: 'shutdown', graceMs });
    for (const slot of this.slots) {
      if (!slot.worker) continue;
      // A worker that has not said hello may not hear the message, and serves nothing yet anyway.
      if (slot.greeted) this.send(slot.worker, { type: 'shutdown', graceMs });
      else slot.worker.process.kill('SIGTERM');
    }
    const deadline = setTimeout(() => {
      for (const worker of running) {
        if (!worker.isDead()) {
          this.log.warn({ worker: worker.id, workerPid: worker.process.pid }, 'worker outlived the shutdown grace; killing it');
          worker.process.kill('SIGKILL');
        }
      }
    }, graceMs + 2000);
    await Promise.all(exited);
    clearTimeout(deadline);
  }

  private resetSlot(slot: WorkerSlot): void {
    slot.worker = null;
    slot.greeted = false;
    slot.tableVersion = null;
    slot.listeners = [];
  }

  private onExit(slot: WorkerSlot, worker: Worker, code: number | null, signal: string | null): void {
    if (this.retiring.delete(worker)) {
      this.log.info({ worker: worker.id, workerPid: worker.process.pid, slot: slot.index, code, signal }, 'replaced worker retired');
      this.emit('retired', worker.id);
      return;
    }
    if (slot.worker !== worker) return;
    this.resetSlot(slot);
    this.emit('exit', slot, worker.id);
    if (this.stopping) {
      this.log.info({ worker: worker.id, workerPid: worker.process.pid, code, signal }, 'worker stopped');
      return;
    }
    const livedMs = Date.now() - slot.startedAt;
    slot.quickExits = livedMs < this.stableAfterMs ? slot.quickExits + 1 : 1;
    const delayMs = respawnDelay(slot.quickExits, this.firstBackoffMs, this.maxBackoffMs);
    this.log.warn(
      { worker: worker.id, workerPid: worker.process.pid, slot: slot.index, code, signal, livedMs, respawnInMs: delayMs },
      signal ? `worker killed by ${signal}; replacing it` : `worker exited with code ${code}; replacing it`,
    );
    slot.respawnTimer = setTimeout(() => this.spawn(slot), delayMs);
  }
}
