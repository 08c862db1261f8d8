/**
 * The upstream's answer on its way to one client: what the retry handler passes on (head, body, end,
 * or a failure no retry took) goes through the response chain to the client's writer. It knows
 * nothing of hosts, breakers or retries; it is also the client's events target once forwarded.
 *
 * No callback may throw into the transport (a throw would end the worker with every connection it
 * holds): the retry handler guards each one and calls internalError, which ends this exchange with a
 * 502, or a cut connection once the answer had started.
 */
import { problem, type LocalReply } from '../exchange/answer.js';
import type { ClientEvents, ClientSide, ResponseStream } from '../exchange/client.js';
import { SEND_AGAIN } from '../exchange/observer.js';
import type { RequestContext } from '../exchange/context.js';
import type { ResponseHead } from '../upstream/response-parser.js';
import { withoutHeaders } from '../upstream/hide-headers.js';
import type { ForwardFailure } from '../proxy/forward-errors.js';
import type { BodyOwner, ClientBody, UpstreamLeg } from './legs.js';
import type { ResponseChain } from './respond.js';
import { reportBug } from './report-bug.js';

const INTERNAL_DETAIL = 'the gateway failed to handle the upstream answer';

export class ProxiedResponse implements ResponseStream, ClientEvents, BodyOwner {
  /** Set by the forward phase right after construction. */
  leg!: UpstreamLeg;
  /** The request body's pump, when there is a body. */
  pump: ClientBody | null = null;
  /** The client left (its connection closed) before its answer was complete. */
  clientGone = false;
  private reported = false;
  /** A HEAD's whole answer went out while the GET body still comes for the observers (ctx.observersWantBody). */
  private headDone = false;

  constructor(
    readonly ctx: RequestContext,
    readonly client: ClientSide,
    private readonly chain: ResponseChain,
  ) {}

  // ---- from the upstream (through the retry handler) ------------------------------------------

  head(status: number, head: ResponseHead): boolean {
    const ctx = this.ctx;
    ctx.status = status;
    if (this.client.ended) return true;
    if (ctx.observers !== null) {
      const headers = this.chain.headersFor(head);
      // A 304 too: the answer to a conditional request the response cache added (it serves its entry).
      if ((status >= 500 || status === 304) && this.substituted(status, headers)) return true;
      this.chain.head(ctx, status, headers);
    }
    // Headers a middleware withholds from the client (after the observers, which may need them).
    if (ctx.hiddenResponseHeaders !== null) head = withoutHeaders(head, ctx.hiddenResponseHeaders);
    // A HEAD served by GET: the GET's body is not wanted, unless an observer keeps it (the response
    // cache storing it). The client drains a small one to keep its connection and drops the
    // connection of a large one.
    if (this.client.startStream(this, status, head) && head.contentLength !== 0 && !ctx.observersWantBody) this.leg.abort();
    return true;
  }

  data(chunk: Buffer): boolean {
    if (this.client.ended) {
      if (this.headDone) this.observersOnly(chunk);
      return true;
    }
    this.chain.data(this.ctx, chunk);
    return this.client.body(chunk);
  }

  end(): void {
    if (this.headDone) return this.bodyOver(true);
    this.client.finish();
  }

  /** The upstream failed and no retry took the request elsewhere. */
  failed(failure: ForwardFailure): void {
    if (this.headDone) return this.bodyOver(false);
    if (this.client.ended) return;
    if (this.client.headSent) {
      // Part of the answer is on the wire: the client must see a broken response, not a complete one.
      this.client.cut();
      return;
    }
    if (this.ctx.observers !== null && this.substituted(failure.status)) return;
    this.replyInstead(problem(failure.status, failure.detail));
  }

  /** A callback threw (a bug of ours, or of an observer): this exchange ends, the worker goes on. */
  internalError(err: unknown): void {
    reportBug(err);
    this.leg.abort();
    if (this.headDone) return this.bodyOver(false);
    if (this.client.ended) return;
    try {
      if (this.client.headSent) this.client.cut();
      else this.replyInstead(problem(502, INTERNAL_DETAIL));
    } catch {
      // The response could not be written either: count the request out.
      this.report(false);
    }
  }

  // ---- from the client -------------------------------------------------------------------------

  onClientAborted(): void {
    if (this.reported) return;
    this.clientGone = true;
    if (!this.client.headSent) this.ctx.status = 499;
    this.leg.abort();
    this.report(false);
  }

  onClientData(chunk: ArrayBuffer, isLast: boolean): void {
    this.pump?.onClientData(chunk, isLast);
  }

  /** The body pump refuses the rest of the request (413, 408). */
  refuse(status: number, detail: string): void {
    this.leg.abort();
    if (this.client.ended) return;
    if (this.client.headSent) this.client.cut();
    else this.replyInstead(problem(status, detail));
  }

  // ---- from the writer (ResponseStream) ------------------------------------------------------

  onClientWritable(): void {
    this.leg.resume();
  }

  onResponseEnded(completed: boolean): void {
    // A HEAD's head is all its client gets; the request is over when the body the observers keep is.
    if (completed && this.ctx.observersWantBody && !this.reported) {
      this.headDone = true;
      return;
    }
    this.report(completed);
  }

  // ---- helpers -------------------------------------------------------------------------------

  /**
   * Content an observer offers in place of the failed answer, written when one does; or the request
   * sent again (SEND_AGAIN, for a 304 to the cache's own conditions), once.
   */
  private substituted(status: number, headers?: readonly string[]): boolean {
    const answer = this.chain.substitute(this.ctx, status, headers);
    if (answer === null) return false;
    if (answer === SEND_AGAIN) return this.leg.sendAgain();
    this.leg.abort();
    this.replyInstead(answer);
    return true;
  }

  /** A GET body chunk behind a HEAD's answer, for the observers only; dropped with the call once none wants the rest. */
  private observersOnly(chunk: Buffer): void {
    this.chain.data(this.ctx, chunk);
    if (this.ctx.observersWantBody) return;
    this.leg.abort();
    this.bodyOver(false);
  }

  /** The end of the body behind a HEAD's complete answer: observers learn whether they saw it whole. */
  private bodyOver(whole: boolean): void {
    if (this.reported) return;
    this.reported = true;
    this.chain.over(this.ctx, whole);
  }

  private replyInstead(reply: LocalReply): void {
    if (this.reported) return;
    this.reported = true;
    this.pump?.stop();
    // A body still arriving cannot be skipped cheaply: the connection closes after the answer.
    this.chain.reply(this.ctx, this.client, reply, this.client.receiving);
  }

  private report(completed: boolean): void {
    if (this.reported) return;
    this.reported = true;
    // The client has a head that promised more than it got (the access log's `cut`).
    if (!completed && this.client.headSent) this.ctx.cut = true;
    this.pump?.stop();
    this.chain.over(this.ctx, completed);
  }
}
