/**
 * One proxied WebSocket connection once both sides are open: the client's socket (uWS) and the
 * upstream's (./upstream-socket.ts). Messages go through whole: uWS and the upstream socket each
 * reassemble fragmented messages, and each side's stack answers its own pings.
 *
 * Backpressure:
 * - upstream -> client: when the client's buffered amount passes HIGH_WATER the upstream socket is
 *   paused (it stops reading its TCP socket); uWS's drain resumes it below LOW_WATER. What the
 *   gateway holds for a slow client is at most HIGH_WATER plus one message.
 * - client -> upstream: no uWS build we load can stop reading a WebSocket (there is no pause() on it),
 *   so the bound is enforced by closing: when the upstream socket's unsent bytes pass `maxUnsent`
 *   (maxPayloadBytes + 4 MiB), the client is closed with 1013 (try again later) and the upstream with
 *   1001. A client that keeps within what the upstream reads never sees it.
 */
import { performance } from 'node:perf_hooks';
import type { UwsWebSocket } from '../native/uws-types.js';
import type { RequestContext } from '../exchange/context.js';
import { ownedTrace } from '../observe/request-observe.js';
import { MESSAGE_TOO_BIG, sendableCloseCode } from './frames.js';
import type { UpstreamMessageHandler, UpstreamSocket } from './upstream-socket.js';

export const HIGH_WATER = 1024 * 1024;
export const LOW_WATER = 256 * 1024;

/** What uWS passes as the close handler's message when it dropped a client for a too large message. */
const TOO_BIG = 'Received too big message';

/** What the client socket carries: the relay it belongs to. */
export interface ClientSlot {
  relay: Relay | null;
}

/** The side that closed first, for the access log. */
export type ClosedBy = 'client' | 'upstream' | 'gateway';

export interface RelayEnd {
  relay: Relay;
  /** The code the first close carried (1006: a side was lost without a close frame). */
  code: number;
  closedBy: ClosedBy;
}

export interface RelayHost {
  readonly maxPayloadBytes: number;
  readonly maxUnsent: number;
  /** The connection is over on the client's side (the upstream side is closed or closing). */
  ended(end: RelayEnd): void;
}

export class Relay implements UpstreamMessageHandler {
  client: UwsWebSocket<ClientSlot> | null = null;
  readonly upstream: UpstreamSocket;
  readonly startedAt: number;
  messagesToUpstream = 0;
  bytesToUpstream = 0;
  messagesToClient = 0;
  bytesToClient = 0;
  /**
   * The counts above as last reported to the metrics (every sweep and at the end): a report sends the
   * difference, so a message updates the two totals only.
   */
  readonly reported = { messagesToUpstream: 0, bytesToUpstream: 0, messagesToClient: 0, bytesToClient: 0 };
  /** Pings either way and the upstream's pongs: a heartbeat without messages keeps a connection (idleFor). */
  private controlFrames = 0;
  /** The idle rule's state (idleFor): messages and control frames when the sweep last looked, and since when it saw none. */
  private seenMessages = 0;
  private quietSince: number;
  private clientOpen = false;
  private finished = false;
  /** Upstream messages that arrived before the client's socket opened (same turn; rare). */
  private early: Array<[Buffer, boolean]> | null = null;
  /**
   * Upstream messages of the current read, [data, isBinary, ...], sent to the client in one cork once
   * the whole read is parsed: uWS writes each uncorked send with a syscall of its own, which was most
   * of the relay's cost per message (profile in docs/websocket.md).
   */
  private batch: Array<Uint8Array | boolean> = [];
  /** The batch sendBatch sends (inside uWS's cork). */
  private corked: Array<Uint8Array | boolean> = NO_MESSAGES;

  constructor(
    private readonly host: RelayHost,
    upstream: UpstreamSocket,
    /** The upgrade request (path, endpoint, upstream, client address) for the access log. */
    readonly ctx: RequestContext,
    /** Sent with the client's messages: uWS compresses when the client negotiated permessage-deflate. */
    private readonly compress: boolean,
  ) {
    this.upstream = upstream;
    this.startedAt = this.quietSince = performance.now();
    // The context lives as long as the connection: its trace ids are copied off randomHex's pool.
    if (ctx.trace !== null) ctx.trace = ownedTrace(ctx.trace);
    upstream.attach(this);
  }

  get isFinished(): boolean {
    return this.finished;
  }

  /** uWS open handler: the client's socket is usable from now until its close handler. */
  clientOpened(client: UwsWebSocket<ClientSlot>): void {
    this.client = client;
    this.clientOpen = true;
    const early = this.early;
    this.early = null;
    if (early !== null) for (const [data, isBinary] of early) this.toClient(data, isBinary);
  }

  /** uWS message handler; `message` is valid only during the call. */
  fromClient(message: ArrayBuffer, isBinary: boolean): void {
    const length = message.byteLength;
    const upstream = this.upstream;
    if (!upstream.isOpen) return;
    // The gateway's limit closes (closedBy "gateway"); the message is not relayed, so not counted.
    if (length > this.host.maxPayloadBytes) return this.closeBoth(1009, 'message too big', 'gateway');
    this.messagesToUpstream++;
    this.bytesToUpstream += length;
    // No copy here: the frame is masked into a buffer of its own before uWS reuses the ArrayBuffer.
    upstream.send(new Uint8Array(message), isBinary);
    if (upstream.bufferedAmount > this.host.maxUnsent) this.closeBoth(1013, 'the upstream does not read fast enough', 'gateway', 1001);
  }

  /**
   * uWS ping handler, and the upstream leg's pings and pongs. Not the client's pongs: uWS pings an idle
   * client itself (sendPingsAutomatically), and the answers would keep every live client's connection
   * open whatever idleTimeoutMs says.
   */
  onControlFrame(): void {
    this.controlFrames++;
  }

  /**
   * The idle sweep's question: did no message and no ping go either way for `idleMs`? Counted from the
   * sweep that last saw some rather than stamped on each (the clock reads were 0.6% of a worker's
   * samples under bench:ws), so a connection is closed between `idleMs` and `idleMs` plus one sweep
   * interval after its last message.
   */
  idleFor(now: number, idleMs: number): boolean {
    const messages = this.messagesToUpstream + this.messagesToClient + this.controlFrames;
    if (messages !== this.seenMessages) {
      this.seenMessages = messages;
      this.quietSince = now;
      return false;
    }
    return now - this.quietSince >= idleMs;
  }

  /** uWS drain handler: the client took some of what was buffered for it. */
  clientDrained(): void {
    if (this.upstream.isPaused && this.client !== null && this.client.getBufferedAmount() < LOW_WATER) this.upstream.resume();
  }

  /** uWS close handler: the client's socket is gone (closed by either side, or lost). */
  clientClosed(code: number, message: ArrayBuffer): void {
    this.clientOpen = false;
    this.client = null;
    if (this.finished) return;
    const reason = Buffer.from(message).toString();
    // "Received too big message", or for a compressed one "..., or other inflation error".
    if (code === 1006 && reason.startsWith(TOO_BIG)) {
      // uWS drops a client whose message exceeds its own limit without a close frame (see upgrade.ts).
      this.closeUpstream(1009, 'message too big');
      return this.finish(1009, 'gateway');
    }
    // A client lost without a close frame: "going away" is the closest code a close frame can carry.
    if (code === 1006) this.closeUpstream(1001, '');
    else if (code === 1005) this.upstream.close(NO_CODE, '');
    else this.closeUpstream(code, reason);
    this.finish(code, 'client');
  }

  /** Closes both sides with `code` (the gateway's decision: idle, shutdown, a limit). */
  closeBoth(code: number, reason: string, closedBy: ClosedBy = 'gateway', upstreamCode = code): void {
    if (this.finished) return;
    this.closeUpstream(upstreamCode, reason);
    this.endClient(code, reason, closedBy);
  }

  /** A message from the upstream (a view of its read: sent on before the next read). */
  onMessage(data: Uint8Array, isBinary: boolean): void {
    const length = data.length;
    this.messagesToClient++;
    this.bytesToClient += length;
    if (!this.clientOpen) {
      if (!this.finished) (this.early ??= []).push([Buffer.from(data), isBinary]);
      return;
    }
    this.batch.push(data, isBinary);
  }

  /** The read's messages go to the client before the read buffer is reused. */
  onReadEnd(): void {
    this.flushBatch();
  }

  private flushBatch(): void {
    const batch = this.batch;
    if (batch.length === 0) return;
    // A new array rather than `length = 0`: optimized code stores to an array's length through a
    // generic call, and the old storage would be dropped anyway (callgrind: about 450 instructions per read).
    this.batch = [];
    if (!this.clientOpen) return;
    const client = this.client!;
    // One message is one send, a system call either way; more go out in one cork.
    if (batch.length === 2) {
      const sent = client.send(batch[0] as Uint8Array, batch[1] as boolean, this.compress);
      // 1: written whole, nothing buffered for the client (uWS's SendStatus).
      if (sent === 1) return;
    } else {
      this.corked = batch;
      client.cork(this.sendBatch);
      this.corked = NO_MESSAGES;
    }
    if (client.getBufferedAmount() > HIGH_WATER && !this.upstream.isPaused) this.upstream.pause();
  }

  private readonly sendBatch = (): void => {
    const batch = this.corked;
    const client = this.client!;
    for (let i = 0; i < batch.length; i += 2) client.send(batch[i] as Uint8Array, batch[i + 1] as boolean, this.compress);
  };

  private toClient(data: Buffer, isBinary: boolean): void {
    const client = this.client!;
    client.send(data, isBinary, this.compress);
    if (client.getBufferedAmount() > HIGH_WATER && !this.upstream.isPaused) this.upstream.pause();
  }

  /** The upstream's side is over: its close frame, the connection lost, or a protocol violation. */
  onClosed(code: number, reason: string, violation: number): void {
    if (this.finished) return;
    this.flushBatch();
    if (violation === MESSAGE_TOO_BIG) return this.endClient(1009, 'message too big', 'gateway');
    if (violation !== 0) return this.endClient(1011, 'the upstream broke the WebSocket protocol', 'upstream', violation);
    // 1006: the upstream was lost without a close frame; 1005: it sent none with a code.
    if (code === 1006) return this.endClient(1011, 'upstream connection lost', 'upstream', 1006);
    // An empty close is passed on empty: 1005 only says no code came, and may not be sent (RFC 6455 7.4.1).
    if (code === 1005) return this.endClient(NO_CODE, '', 'upstream', 1005);
    this.endClient(sendableCloseCode(code) ? code : 1011, reason, 'upstream');
  }

  private closeUpstream(code: number, reason: string): void {
    this.upstream.close(sendableCloseCode(code) ? code : 1011, truncateReason(reason));
  }

  private endClient(code: number, reason: string, closedBy: ClosedBy, loggedCode = code): void {
    if (this.finished) return;
    const client = this.client;
    this.finish(loggedCode, closedBy);
    if (client !== null && this.clientOpen) {
      this.clientOpen = false;
      if (code === NO_CODE) client.end();
      else client.end(code, truncateReason(reason));
    }
  }

  private finish(code: number, closedBy: ClosedBy): void {
    if (this.finished) return;
    this.finished = true;
    this.early = null;
    this.host.ended({ relay: this, code, closedBy });
  }
}

const NO_MESSAGES: Array<Uint8Array | boolean> = [];

/** A close frame without a code (what a side that closed with none gets; uWS and the upstream leg write it empty). */
const NO_CODE = 0;

/** A close reason fits in 123 bytes of UTF-8. */
function truncateReason(reason: string): string {
  if (Buffer.byteLength(reason) <= 123) return reason;
  let cut = Buffer.from(reason).subarray(0, 123).toString();
  // A character cut in half decodes to U+FFFD, which may be longer than what it replaced.
  while (Buffer.byteLength(cut) > 123) cut = cut.slice(0, -1);
  return cut;
}
