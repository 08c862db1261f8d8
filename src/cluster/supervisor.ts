import cluster, { type Worker } from 'node:cluster';
import { isLeaseWorkerMessage, type LeaseWorkerMessage } from '../stores/lease-messages.js';
import { receiveLeases } from './lease-outbox.js';
import { EventEmitter } from 'node:events';
import type { Logger } from '../log.js';
import type { MetricsDelta } from '../metrics/delta.js';
import { timerDelay } from '../config/durations.js';
import {
  isWorkerMessage,
  type HelloMessage,
  type MetricsAskMessage,
  type MetricsDeltaMessage,
  type PrimaryToWorker,
  type ReadyMessage,
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
  /** Of those, the ones its worker reports failing. */
  failingListeners: string[];
  /** Middleware ids ready in the slot's worker. */
  middleware: string[];
}

export interface SupervisorOptions {
  log: Logger;
  count: number;
  /** A worker that listened and lived at least this long before exiting is replaced at once. */
  stableAfterMs?: number;
  firstBackoffMs?: number;
  maxBackoffMs?: number;
  /** How long a successor (replace()) may take to report ready; default SUCCESSOR_READY_TIMEOUT_MS. */
  successorReadyMs?: number;
}

/**
 * How long a successor started by replace() may take to report ready before it is killed and its
 * predecessor keeps serving. Independent of the config: a worker's start (fork, load uWS, receive and
 * index the table, bind the port) depends on none of its timeouts, and takes well under a second
 * unloaded; the rest is margin for a busy machine and a large table.
 */
export const SUCCESSOR_READY_TIMEOUT_MS = 10_000;

export type ReplaceResult = { ok: true } | { ok: false; reason: string };

export interface SupervisorEvents {
  /** A new worker (a slot's own, or a successor) is up and listening for messages. */
  hello: [slot: WorkerSlot, worker: Worker];
  /** From a slot's worker or a successor; a `ready` has already been recorded in the slot when it is the slot's. */
  message: [slot: WorkerSlot, worker: Worker, message: Exclude<WorkerToPrimary, HelloMessage | MetricsDeltaMessage | MetricsAskMessage>];
  delta: [workerId: number, delta: MetricsDelta];
  /** A worker (any: a retiring one still answers its requests) asks for the merged metrics. */
  'metrics-ask': [worker: Worker, ask: MetricsAskMessage];
  /** The slot's worker died (it is replaced as usual). */
  exit: [slot: WorkerSlot, workerId: number];
  /** A worker that no longer held a slot has exited: a predecessor replaced on purpose, or a successor that failed. */
  retired: [workerId: number];
  /** A message for the `local` store's lease bank, from any worker (retiring ones too: their spends count). */
  lease: [workerId: number, message: LeaseWorkerMessage];
}

/** A worker started by replace() beside the slot's worker; it takes the slot once it reports ready. */
interface Succession {
  readonly worker: Worker;
  readonly startedAt: number;
  readonly graceMs: number;
  greeted: boolean;
  timer: NodeJS.Timeout;
  settle: (result: ReplaceResult) => void;
}

/** Back-off before respawning: none after one exit, then doubling while the exits come quickly. */
export function respawnDelay(quickExits: number, firstBackoffMs: number, maxBackoffMs: number): number {
  if (quickExits <= 1) return 0;
  return Math.min(firstBackoffMs * 2 ** (quickExits - 2), maxBackoffMs);
}

function exitReason(code: number | null, signal: string | null): string {
  return signal ? `was killed by ${signal}` : `exited with code ${code}`;
}

/**
 * Keeps `count` workers alive. A worker that exits is replaced (with back-off when it crash-loops);
 * nothing a worker does can make the primary throw.
 */
export class Supervisor extends EventEmitter<SupervisorEvents> {
  readonly slots: WorkerSlot[];
  private stopping = false;
  /** Workers that no longer hold a slot, on their way out (draining, or killed); they are not respawned. */
  private readonly retiring = new Set<Worker>();
  private readonly successions = new Map<WorkerSlot, Succession>();
  private readonly log: Logger;
  private readonly stableAfterMs: number;
  private readonly firstBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly successorReadyMs: number;

  constructor(options: SupervisorOptions) {
    super();
    this.log = options.log;
    this.stableAfterMs = options.stableAfterMs ?? 5000;
    this.firstBackoffMs = options.firstBackoffMs ?? 250;
    this.maxBackoffMs = options.maxBackoffMs ?? 30_000;
    this.successorReadyMs = options.successorReadyMs ?? SUCCESSOR_READY_TIMEOUT_MS;
    this.slots = Array.from({ length: options.count }, (_, index) => ({
      index,
      worker: null,
      greeted: false,
      startedAt: 0,
      quickExits: 0,
      respawnTimer: null,
      tableVersion: null,
      listeners: [],
      failingListeners: [],
      middleware: [],
    }));
  }

  spawn(slot: WorkerSlot): void {
    if (this.stopping || slot.worker) return;
    slot.respawnTimer = null;
    this.resetSlot(slot);
    slot.startedAt = Date.now();
    const worker = this.fork(slot);
    if (worker instanceof Error) {
      slot.quickExits++;
      const delayMs = Math.max(this.firstBackoffMs, respawnDelay(slot.quickExits, this.firstBackoffMs, this.maxBackoffMs));
      this.log.error({ err: worker, slot: slot.index, retryInMs: delayMs }, 'could not start a worker');
      slot.respawnTimer = setTimeout(() => this.spawn(slot), delayMs);
      return;
    }
    slot.worker = worker;
    this.log.info({ workerPid: worker.process.pid, worker: worker.id, slot: slot.index }, 'worker started');
  }

  /** Workers that hold a slot, said hello and are still connected. */
  liveWorkers(): Worker[] {
    const workers: Worker[] = [];
    for (const slot of this.slots) if (slot.worker && slot.greeted && slot.worker.isConnected()) workers.push(slot.worker);
    return workers;
  }

  /** To the worker of that id, whatever its role (a slot's, a successor, one retiring); dropped when it is gone. */
  sendTo(workerId: number, message: PrimaryToWorker): void {
    const worker = cluster.workers?.[workerId];
    if (worker !== undefined) this.send(worker, message);
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

  /** To every slot's worker, and to successors still starting (they must not miss a table). */
  broadcast(message: PrimaryToWorker): void {
    for (const worker of this.liveWorkers()) this.send(worker, message);
    for (const succession of this.successions.values()) if (succession.greeted) this.send(succession.worker, message);
  }

  /**
   * Starts a successor beside the slot's worker. Once the successor reports ready it takes the slot,
   * and its predecessor stops accepting and drains; both listen on the same port meanwhile, so no
   * connection is refused. A successor that exits first, or does not report ready within
   * `successorReadyMs`, has failed: it is killed if still alive, the predecessor keeps serving the slot,
   * and the result says why. An empty slot (its worker died and is being respawned) needs nothing:
   * its next worker starts with the current state.
   */
  replace(slot: WorkerSlot, graceMs: number): Promise<ReplaceResult> {
    if (this.stopping) return Promise.resolve({ ok: false, reason: 'the gateway is shutting down' });
    if (this.successions.has(slot)) return Promise.resolve({ ok: false, reason: 'a successor is already starting' });
    if (!slot.worker) return Promise.resolve({ ok: true });
    const worker = this.fork(slot);
    if (worker instanceof Error) return Promise.resolve({ ok: false, reason: `could not be started (${worker.message})` });
    this.log.info({ workerPid: worker.process.pid, worker: worker.id, slot: slot.index }, 'worker started');
    return new Promise((resolve) => {
      const succession: Succession = {
        worker,
        startedAt: Date.now(),
        graceMs,
        greeted: false,
        timer: setTimeout(() => this.abandon(slot, succession), this.successorReadyMs),
        settle: resolve,
      };
      this.successions.set(slot, succession);
    });
  }

  /**
   * Ask every worker to drain and wait for them, killing any that outlast `graceMs` plus a margin. A
   * worker stopped by a signal rather than a message (a successor, one that has not said hello) may
   * first serve on for `drainMs` (worker.ts): it gets that much longer.
   */
  async stop(graceMs: number, drainMs = 0): Promise<void> {
    this.stopping = true;
    for (const slot of this.slots) {
      if (slot.respawnTimer) clearTimeout(slot.respawnTimer);
      slot.respawnTimer = null;
    }
    const signalled = new Set<Worker>();
    // A successor serves nothing yet, and may be stuck in its start (where a message would wait its turn).
    for (const [slot, succession] of this.successions) {
      this.endSuccession(slot, succession);
      this.retiring.add(succession.worker);
      succession.worker.process.kill('SIGTERM');
      signalled.add(succession.worker);
      succession.settle({ ok: false, reason: 'the gateway is shutting down' });
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
      else {
        slot.worker.process.kill('SIGTERM');
        signalled.add(slot.worker);
      }
    }
    const kill = (workers: readonly Worker[]): void => {
      for (const worker of workers) {
        if (!worker.isDead()) {
          this.log.warn({ worker: worker.id, workerPid: worker.process.pid }, 'worker outlived the shutdown grace; killing it');
          worker.process.kill('SIGKILL');
        }
      }
    };
    const deadlines = [
      setTimeout(() => kill(running.filter((worker) => !signalled.has(worker))), timerDelay(graceMs + 2000)),
      setTimeout(() => kill([...signalled]), timerDelay(drainMs + graceMs + 2000)),
    ];
    await Promise.all(exited);
    for (const deadline of deadlines) clearTimeout(deadline);
  }

  private fork(slot: WorkerSlot): Worker | Error {
    let worker: Worker;
    try {
      worker = cluster.fork({ GATEWAY_WORKER_SLOT: String(slot.index) });
    } catch (err) {
      return err instanceof Error ? err : new Error(String(err));
    }
    worker.on('message', (message: unknown) => this.onMessage(slot, worker, message));
    worker.on('error', (err: Error) => {
      this.log.warn({ err, worker: worker.id, slot: slot.index }, 'worker channel error');
    });
    worker.on('exit', (code: number | null, signal: string | null) => this.onExit(slot, worker, code, signal));
    return worker;
  }

  private onMessage(slot: WorkerSlot, worker: Worker, message: unknown): void {
    if (receiveLeases(message, isLeaseWorkerMessage, (lease) => this.emit('lease', worker.id, lease))) return;
    if (!isWorkerMessage(message)) return;
    // A retiring worker's last requests still count.
    if (message.type === 'metrics-delta') return void this.emit('delta', worker.id, message.delta);
    if (message.type === 'metrics-ask') return void this.emit('metrics-ask', worker, message);
    const succession = this.successions.get(slot);
    if (slot.worker === worker) {
      if (message.type === 'hello') {
        slot.greeted = true;
        return void this.emit('hello', slot, worker);
      }
      if (message.type === 'ready') {
        slot.tableVersion = message.tableVersion;
        slot.listeners = message.listeners;
        slot.failingListeners = message.failingListeners ?? [];
        slot.middleware = message.middleware;
      }
      this.emit('message', slot, worker, message);
    } else if (succession?.worker === worker) {
      if (message.type === 'hello') {
        succession.greeted = true;
        this.emit('hello', slot, worker);
      } else if (message.type === 'ready') this.takeOver(slot, succession, message);
      else this.emit('message', slot, worker, message);
    }
  }

  /** The successor serves: it takes the slot, and the predecessor (if still alive) drains and exits. */
  private takeOver(slot: WorkerSlot, succession: Succession, ready: ReadyMessage): void {
    this.endSuccession(slot, succession);
    const predecessor = slot.worker;
    if (predecessor) {
      this.retiring.add(predecessor);
      if (slot.greeted) this.send(predecessor, { type: 'shutdown', graceMs: succession.graceMs });
      else predecessor.process.kill('SIGTERM');
    }
    if (slot.respawnTimer) clearTimeout(slot.respawnTimer);
    slot.respawnTimer = null;
    slot.worker = succession.worker;
    slot.greeted = true;
    slot.startedAt = succession.startedAt;
    slot.tableVersion = ready.tableVersion;
    slot.listeners = ready.listeners;
    slot.failingListeners = ready.failingListeners ?? [];
    slot.middleware = ready.middleware;
    this.emit('message', slot, succession.worker, ready);
    succession.settle({ ok: true });
  }

  /** The successor did not report ready in time: killed; the slot keeps its worker. */
  private abandon(slot: WorkerSlot, succession: Succession): void {
    this.endSuccession(slot, succession);
    this.retiring.add(succession.worker);
    succession.worker.process.kill('SIGKILL');
    const reason = `did not report ready within ${this.successorReadyMs} ms`;
    this.log.warn({ worker: succession.worker.id, workerPid: succession.worker.process.pid, slot: slot.index }, `the successor ${reason}; killed it`);
    this.respawnIfEmpty(slot);
    succession.settle({ ok: false, reason });
  }

  private endSuccession(slot: WorkerSlot, succession: Succession): void {
    clearTimeout(succession.timer);
    this.successions.delete(slot);
  }

  /** A successor failed while its slot had lost its own worker too: the slot gets a worker as usual. */
  private respawnIfEmpty(slot: WorkerSlot): void {
    if (this.stopping || slot.worker || slot.respawnTimer) return;
    slot.respawnTimer = setTimeout(() => this.spawn(slot), respawnDelay(slot.quickExits, this.firstBackoffMs, this.maxBackoffMs));
  }

  private resetSlot(slot: WorkerSlot): void {
    slot.worker = null;
    slot.greeted = false;
    slot.tableVersion = null;
    slot.listeners = [];
    slot.failingListeners = [];
    slot.middleware = [];
  }

  private onExit(slot: WorkerSlot, worker: Worker, code: number | null, signal: string | null): void {
    const ids = { worker: worker.id, workerPid: worker.process.pid, slot: slot.index, code, signal };
    if (this.retiring.delete(worker)) {
      this.log.info(ids, 'replaced worker retired');
      this.emit('retired', worker.id);
      return;
    }
    const succession = this.successions.get(slot);
    if (succession?.worker === worker) {
      this.endSuccession(slot, succession);
      const reason = `${exitReason(code, signal)} before it was ready`;
      this.log.warn(ids, `the successor ${reason}; its predecessor keeps serving`);
      this.emit('retired', worker.id);
      this.respawnIfEmpty(slot);
      succession.settle({ ok: false, reason });
      return;
    }
    if (slot.worker !== worker) return;
    // A worker that never reported ready is in a crash loop however long its start took (a loaded machine
    // can take longer than stableAfterMs to start one).
    const served = slot.tableVersion !== null;
    this.resetSlot(slot);
    this.emit('exit', slot, worker.id);
    if (this.stopping) {
      this.log.info(ids, 'worker stopped');
      return;
    }
    const livedMs = Date.now() - slot.startedAt;
    slot.quickExits = !served || livedMs < this.stableAfterMs ? slot.quickExits + 1 : 1;
    if (succession) {
      // The successor already starting takes the slot when ready (or the slot is respawned if it fails).
      this.log.warn({ ...ids, livedMs }, `worker ${exitReason(code, signal)}; the successor starting in its slot takes over`);
      return;
    }
    const delayMs = respawnDelay(slot.quickExits, this.firstBackoffMs, this.maxBackoffMs);
    this.log.warn(
      { ...ids, livedMs, respawnInMs: delayMs },
      signal ? `worker killed by ${signal}; replacing it` : `worker exited with code ${code}; replacing it`,
    );
    slot.respawnTimer = setTimeout(() => this.spawn(slot), delayMs);
  }
}
