/**
 * The request body's pump: from the client (onClientData) to the upstream call, within limits.
 *
 * While middleware decide, nothing is sent: chunks are held, and the client socket paused once
 * HOLD_BYTES are held, until the decision (an answer of the middleware's own, or a forward that takes
 * the held bytes and the rest of the stream). Once attached to the upstream call: a body that arrived
 * whole with the head is sent as one buffer (a retry can send it again); otherwise it is streamed as it
 * arrives, the client paused while the call cannot take more. Past limits.maxBodyBytes: 413; not whole
 * within timeouts.clientRequestMs: 408 (the forward phase's sweep calls tooSlow). Time the client is
 * paused because the upstream does not take the body is not the client's: the deadline moves by it
 * (the upstream's side has its own bound, timeouts.upstreamMs).
 */
// The module binding, not the global: globalThis.performance is an accessor, read on every call.
import { performance } from 'node:perf_hooks';
import type { ClientSide } from '../exchange/client.js';
import type { RequestContext } from '../exchange/context.js';
import type { BodyOwner, BodySink, ClientBody } from './legs.js';

/** Past this much held body, the client socket is paused (TCP pushes back) until the decision. */
const HOLD_BYTES = 64 * 1024;

/** How the pump starts the upstream call once it knows how the body comes. */
export interface BodyDispatch {
  /** The whole body (or none) is here. */
  sendWhole(body: Buffer | null): void;
  /** The body is still arriving: stream it into the returned sink. */
  sendStreamed(length: number): BodySink;
}

export class BodyPump implements ClientBody {
  /** performance.now() by which the whole request must have arrived. */
  deadline = 0;
  /** More than limits.maxBodyBytes arrived while held; answered 413 at the decision. */
  tooLarge = false;
  private readonly held: Buffer[] = [];
  private heldBytes = 0;
  private complete: boolean;
  /** Set once forwarded: where chunks go. */
  private sink: BodySink | null = null;
  private dispatch: BodyDispatch | null = null;
  private owner: BodyOwner | null = null;
  private stopped = false;
  /** The forward phase's set of pumps its sweep checks for slow clients; left once the body is whole or the request over. */
  private sweeping: Set<BodyPump> | null = null;
  /** performance.now() since the client is paused for the upstream (0: it is not). */
  private upstreamWaitSince = 0;

  constructor(
    private readonly ctx: RequestContext,
    private readonly client: ClientSide,
    private readonly maxBodyBytes: number,
  ) {
    this.complete = !ctx.hasBody;
  }

  /** The last body chunk arrived (or there is none). */
  get whole(): boolean {
    return this.complete;
  }

  /** Still receiving the body of a forwarded request (the sweep's question). */
  get receiving(): boolean {
    return !this.stopped && !this.complete && this.owner !== null;
  }

  /** Past the deadline by the client's own doing (not while the upstream holds it back). */
  overdue(now: number): boolean {
    return this.upstreamWaitSince === 0 && now > this.deadline;
  }

  /** uWS body chunk; only valid during this call. */
  onClientData(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.stopped || this.tooLarge) return;
    const ctx = this.ctx;
    const length = chunk.byteLength;
    ctx.bytesIn += length;
    if (ctx.bytesIn > this.maxBodyBytes) {
      if (this.owner === null) {
        // Held: answered 413 once the middleware has decided; nothing more is kept.
        this.tooLarge = true;
        this.held.length = 0;
        this.client.pause();
        return;
      }
      this.stopped = true;
      this.owner.refuse(413, `the request body is larger than ${this.maxBodyBytes} bytes`);
      return;
    }
    if (isLast) {
      this.complete = true;
      this.sweeping?.delete(this);
    }
    // Ours: the call keeps it until the socket took it, a capture keeps it for its listeners.
    const copy = length > 0 ? Buffer.from(new Uint8Array(chunk)) : null;
    if (copy !== null) ctx.capture?.addRequestChunk(copy);
    if (this.owner === null) {
      if (copy !== null) {
        this.held.push(copy);
        this.heldBytes += length;
      }
      if (!isLast && this.heldBytes >= HOLD_BYTES) this.client.pause();
      return;
    }
    if (this.sink === null) {
      if (isLast) {
        // The whole body came with the head: forwarded as one buffer (and retryable).
        this.dispatch!.sendWhole(copy);
        return;
      }
      this.sink = this.dispatch!.sendStreamed(ctx.bodyLength);
    }
    if (copy !== null && !this.sink.writeBody(copy) && !isLast) this.waitForUpstream();
    if (isLast) this.sink.endBody();
  }

  /**
   * Forwarding starts: what was held goes out (whole when it all arrived, else streamed and the rest
   * follows), then every chunk as it arrives. `wasHeld`: the pump held the body while middleware decided.
   */
  attach(owner: BodyOwner, dispatch: BodyDispatch, wasHeld: boolean): void {
    this.owner = owner;
    this.dispatch = dispatch;
    const held = this.held;
    if (this.complete) {
      const whole = held.length === 0 ? null : held.length === 1 ? held[0]! : Buffer.concat(held);
      held.length = 0;
      dispatch.sendWhole(whole !== null && whole.length > 0 ? whole : null);
      return;
    }
    // Not held: the first chunk tells whether the body came whole with the head. Held and incomplete: streamed now.
    if (!wasHeld) return;
    const sink = (this.sink = dispatch.sendStreamed(this.ctx.bodyLength));
    let writable = true;
    for (let i = 0; i < held.length; i++) writable = sink.writeBody(held[i]!);
    held.length = 0;
    if (writable) this.client.resume();
    else this.waitForUpstream();
  }

  /** The upstream call took the body written so far: the client may send more. */
  drained(): void {
    if (this.stopped) return;
    if (this.upstreamWaitSince !== 0) {
      this.deadline += performance.now() - this.upstreamWaitSince;
      this.upstreamWaitSince = 0;
    }
    this.client.resume();
  }

  private waitForUpstream(): void {
    this.client.pause();
    if (this.upstreamWaitSince === 0) this.upstreamWaitSince = performance.now();
  }

  /** The client did not send its whole request in time. */
  tooSlow(): void {
    if (!this.receiving) return;
    this.stopped = true;
    this.owner!.refuse(408, 'the request was not received in time');
  }

  /** The request is over: nothing more is read. */
  stop(): void {
    this.stopped = true;
    this.held.length = 0;
    this.sweeping?.delete(this);
  }

  /** Checked by `sweep` against its deadline until the body is whole or the request over. */
  sweptBy(sweep: Set<BodyPump>, deadline: number): void {
    if (this.complete || this.stopped) return;
    this.deadline = deadline;
    this.sweeping = sweep;
    sweep.add(this);
  }
}
