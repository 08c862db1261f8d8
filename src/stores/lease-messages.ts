/*
 * Messages between the LeaseBank (primary) and the LeaseClients (workers) of the `local` store. Plain
 * JSON-safe objects (finite numbers, strings, arrays): they cross node:cluster IPC as they are. The
 * channel between the primary and one worker must keep order and lose nothing (node:cluster IPC does);
 * messages of different workers may interleave in any order.
 *
 * Every count a worker sends is a delta since its previous message about that key, so the bank's books
 * stay right whatever order different workers' messages arrive in. See ./README.md for the protocol.
 */

/**
 * What a worker reports about a key's tokens: `used` tokens spent since its last report, when
 * (`spends`: flat `[slotEndMs, count, ltMs, ltFrac, ...]` per time slot, see ./spend-log.ts; the
 * counts add up to `used`), and
 * `returned` tokens it held unused and gives back.
 */
export interface LeaseReport {
  key: string;
  /** The worker's clock when it made the report: its later spends date from then or after. */
  at: number;
  used: number;
  spends: number[];
  returned: number;
}

/** worker → bank: asks for up to `want` tokens of `key` (and reports its use of the key so far). */
export interface LeaseAcquireMessage extends LeaseReport {
  type: 'lease-acquire';
  /** Per-worker sequence number, echoed in the grant. */
  seq: number;
  limit: number;
  windowMs: number;
  want: number;
}

/** worker → bank: gives back held tokens (lease expired, key idle, or the worker evicts the key). */
export interface LeaseReleaseMessage {
  type: 'lease-release';
  reports: LeaseReport[];
}

/** worker → bank: the answer to a recall: everything the worker held of the key (it now holds none). */
export interface LeaseRecalledMessage extends LeaseReport {
  type: 'lease-recalled';
  recallId: number;
}

export type LeaseWorkerMessage = LeaseAcquireMessage | LeaseReleaseMessage | LeaseRecalledMessage;

/**
 * bank → worker: the answer to an acquire. `granted` 0 is a denial. Instants are epoch ms of the
 * shared clock (the primary and its workers run on one host).
 */
export interface LeaseGrantMessage {
  type: 'lease-grant';
  seq: number;
  key: string;
  granted: number;
  /** Tokens still free in the bank after this grant (other workers' held tokens count as spent). */
  free: number;
  /** When the bucket is full again if every held token is spent now. */
  fullAt: number;
  /** For a denial: when the bank will have a free token, barring returns. 0 otherwise. */
  retryAt: number;
}

/** bank → worker: give back what you hold of `key` (another worker needs it and the bank is empty). */
export interface LeaseRecallMessage {
  type: 'lease-recall';
  recallId: number;
  key: string;
}

export type LeaseBankMessage = LeaseGrantMessage | LeaseRecallMessage;

/**
 * Several messages of one channel and direction, in the order they were sent: the transport's
 * batching (src/cluster/lease-outbox.ts). The bank and the clients never see one; the receiving
 * process hands each message on in order.
 */
export interface LeaseBatchMessage<M> {
  type: 'lease-batch';
  messages: M[];
}

function typeOf(value: unknown): unknown {
  return typeof value === 'object' && value !== null ? (value as { type?: unknown }).type : undefined;
}

export function isLeaseWorkerMessage(value: unknown): value is LeaseWorkerMessage {
  const type = typeOf(value);
  return type === 'lease-acquire' || type === 'lease-release' || type === 'lease-recalled';
}

export function isLeaseBankMessage(value: unknown): value is LeaseBankMessage {
  const type = typeOf(value);
  return type === 'lease-grant' || type === 'lease-recall';
}

export function isLeaseBatch(value: unknown): value is LeaseBatchMessage<unknown> {
  return typeOf(value) === 'lease-batch' && Array.isArray((value as { messages?: unknown }).messages);
}
