/**
 * Respond: the one response chain. Every answer a client gets passes here: the upstream's (its head and
 * body shown to the response observers a middleware or listener registered), one an observer offers in
 * place of a failed upstream answer (stale-if-error), and every local reply (problem+json, built-ins,
 * cached answers, OPTIONS), written through the client's ResponseWriter. When the request is over the
 * chain tells the observers how it ended and hands the request to the done phase.
 */
import type { ContentAnswer, LocalReply } from '../exchange/answer.js';
import type { SEND_AGAIN } from '../exchange/observer.js';
import type { ResponseWriter } from '../exchange/client.js';
import type { RequestContext } from '../exchange/context.js';
import type { ResponseHead } from '../upstream/response-parser.js';
import { reportBug } from './report-bug.js';
import { headerValue } from '../observe/request-observe.js';

export class ResponseChain {
  constructor(
    /** The request is over (counted out, listeners told). */
    private readonly finished: (ctx: RequestContext) => void,
  ) {}

  /** The upstream's end-to-end headers as observers see them (flat strings, names lower-case). */
  headersFor(head: ResponseHead): string[] {
    return endToEndHeaders(head.headers);
  }

  /**
   * Observers see the upstream's head before the client does. A throw is an observer's bug: it reaches
   * the caller, which ends this exchange (502 before anything was sent, a cut connection after).
   */
  head(ctx: RequestContext, status: number, headers: readonly string[]): void {
    const observers = ctx.observers;
    if (observers === null) return;
    for (let i = observers.length - 1; i >= 0; i--) observers[i]!.onHead(status, headers);
  }

  /** Observers see a body chunk before the client does (a throw as in head()). */
  data(ctx: RequestContext, chunk: Uint8Array): void {
    const observers = ctx.observers;
    if (observers === null) return;
    for (let i = observers.length - 1; i >= 0; i--) observers[i]!.onData(chunk);
  }

  /**
   * The first content an observer offers in place of a failed answer or of a 304 to a conditional
   * request the response cache added (latest registered first), or SEND_AGAIN for such a 304 it
   * cannot use, or null.
   */
  substitute(ctx: RequestContext, status: number, headers?: readonly string[]): ContentAnswer | typeof SEND_AGAIN | null {
    const observers = ctx.observers;
    if (observers === null) return null;
    for (let i = observers.length - 1; i >= 0; i--) {
      const answer = observers[i]!.substitute(status, headers);
      if (answer !== null) return answer;
    }
    return null;
  }

  /**
   * A local reply ends the request: written through `client` (`close` when body bytes remain unread),
   * then the request is over, its observers told it did not get an upstream answer.
   */
  reply(ctx: RequestContext, client: ResponseWriter, reply: LocalReply, close: boolean): void {
    // An answer from the cache says so in the access log.
    if (reply.kind === 'content') ctx.cache = headerValue(reply.headers, 'x-cache');
    client.reply(reply, close);
    this.over(ctx, false);
  }

  /** The request is over: `completed` when the client got the upstream's answer whole. */
  over(ctx: RequestContext, completed: boolean): void {
    const observers = ctx.observers;
    if (observers !== null) {
      for (let i = observers.length - 1; i >= 0; i--) {
        try {
          if (completed) observers[i]!.onEnd();
          else observers[i]!.onAbort();
        } catch (err) {
          reportBug(err);
        }
      }
    }
    this.finished(ctx);
  }
}

/** The headers the client gets of the upstream's, as strings (flat, names lower-case): built only for observers and middleware fetches. */
export function endToEndHeaders(raw: readonly Buffer[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    // Date is kept: the response cache reads the origin's (RFC 9111 4.2.3); observers never write it.
    // Via too: a stored answer keeps the upstream's entries (RFC 9111 3.1), and a hit adds the gateway's.
    out.push(name.toString('latin1').toLowerCase(), raw[i + 1]!.toString('latin1'));
  }
  return out;
}
