/**
 * A routed request waiting for its middleware to decide (contract 9). uWS hands the request's head
 * only during the handler, so what the stages need is in the RequestContext already; what remains is
 * the client side: the connection may close meanwhile (onAborted), and body bytes keep arriving. They
 * are held, and the socket paused once HOLD_BYTES are held, until the decision: an answer of the
 * middleware's own, or an Exchange that takes the held bytes and the rest of the stream.
 */
import { problem, type Answer } from '../middleware/types.js';
import type { UwsResponse } from '../native/uws-types.js';
import type { Exchange } from './forward.js';
import type { RequestContext } from './request-context.js';

/** Past this much held body, the client socket is paused (TCP pushes back) until the decision. */
const HOLD_BYTES = 64 * 1024;

export interface HeldRequestHost {
  readonly maxBodyBytes: number;
  /** Forwards it: an Exchange that has taken the held body, or null when it was answered instead. */
  forwardHeld(held: HeldRequest): Exchange | null;
  /** Answers it with `answer` (corked); `close` when body bytes remain unread. */
  answerHeld(held: HeldRequest, answer: Answer, close: boolean): void;
  /** It ended without an exchange (answered, or the client left): count it out and report it. */
  heldDone(held: HeldRequest): void;
}

export class HeldRequest {
  readonly chunks: Buffer[] = [];
  /** The last body chunk arrived (or there is no body). */
  complete: boolean;
  paused = false;
  private held = 0;
  private tooLarge = false;
  private over = false;
  private exchange: Exchange | null = null;

  constructor(
    private readonly host: HeldRequestHost,
    readonly res: UwsResponse,
    readonly ctx: RequestContext,
  ) {
    this.complete = !ctx.hasBody;
  }

  onAborted(): void {
    if (this.exchange !== null) return this.exchange.onClientAborted();
    if (this.over) return;
    this.over = true;
    this.ctx.status = 499;
    this.host.heldDone(this);
  }

  /** uWS body chunk; only valid during this call. */
  onData(chunk: ArrayBuffer, isLast: boolean): void {
    if (this.exchange !== null) return this.exchange.onClientData(chunk, isLast);
    if (this.over || this.tooLarge) return;
    const ctx = this.ctx;
    ctx.bytesIn += chunk.byteLength;
    if (ctx.bytesIn > this.host.maxBodyBytes) {
      // Answered 413 once the middleware has decided; nothing more is kept.
      this.tooLarge = true;
      this.chunks.length = 0;
      this.pause();
      return;
    }
    if (chunk.byteLength > 0) {
      const copy = Buffer.from(new Uint8Array(chunk));
      this.chunks.push(copy);
      ctx.capture?.addRequestChunk(copy);
      this.held += chunk.byteLength;
    }
    if (isLast) this.complete = true;
    else if (this.held >= HOLD_BYTES) this.pause();
  }

  /** The pipeline's outcome: answer, or forward. */
  decided(answer: Answer | null): void {
    if (this.over) return;
    if (this.tooLarge) answer = problem(413, `the request body is larger than ${this.host.maxBodyBytes} bytes`);
    if (answer !== null) {
      this.over = true;
      this.host.answerHeld(this, answer, !this.complete);
      this.host.heldDone(this);
      return;
    }
    this.over = true;
    this.exchange = this.host.forwardHeld(this);
  }

  private pause(): void {
    if (this.paused) return;
    this.paused = true;
    this.res.pause();
  }
}
