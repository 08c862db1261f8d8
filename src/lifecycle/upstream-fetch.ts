/**
 * FetchUpstream (src/middleware/types.ts) over the forward phase: a GET made for a middleware, outside
 * any client's request (the response cache's background refresh). The host is the one the request's
 * endpoint would be forwarded to now (balancer and breakers) and the call goes through that host's
 * pool, so it has the upstream's TLS settings, connections and timeouts as proxied requests do. One
 * try: no retry on another host, and its outcome does not move the breakers (it is no client's).
 */
import type { RequestContext } from '../exchange/context.js';
import type { FetchedAnswer, FetchUpstream } from '../middleware/types.js';
import type { UpstreamCall, UpstreamHandler } from '../upstream/call.js';
import type { UpstreamError } from '../upstream/call-errors.js';
import type { ResponseHead } from '../upstream/response-parser.js';
import type { ForwardPhase } from './forward.js';
import { endToEndHeaders } from './respond.js';

export function fetchThrough(forwarder: ForwardPhase): FetchUpstream {
  return (ctx: RequestContext, target: string, headers: readonly string[], limits: { timeoutMs: number; maxBodyBytes: number }) => {
    // Picking sets which listeners the host disables for ctx: this request is not the one forwarded.
    const disabled = ctx.disabledListeners;
    const upstream = forwarder.pickHost(ctx);
    ctx.disabledListeners = disabled;
    if (upstream === null) return null;
    return new Promise<FetchedAnswer>((resolve, reject) => {
      const collector = new Collector(upstream, limits.maxBodyBytes, resolve, reject);
      collector.start(forwarder.poolFor(upstream).request('GET', target, headers, null, collector), limits.timeoutMs);
    });
  };
}

/** The whole answer, copied out of the connection's buffer as it arrives. */
class Collector implements UpstreamHandler {
  private call: UpstreamCall | null = null;
  private timer: NodeJS.Timeout | null = null;
  private status = 0;
  private headers: string[] = [];
  private readonly chunks: Buffer[] = [];
  private bytes = 0;
  private settled = false;

  constructor(
    private readonly upstream: string,
    private readonly maxBodyBytes: number,
    private readonly resolve: (answer: FetchedAnswer) => void,
    private readonly reject: (err: Error) => void,
  ) {}

  /** No callback comes from inside pool.request(), so the call is known before the first one. */
  start(call: UpstreamCall, timeoutMs: number): void {
    this.call = call;
    this.timer = setTimeout(() => this.abort(`no whole answer from ${this.upstream} within ${timeoutMs} ms`), timeoutMs);
    this.timer.unref();
  }

  onHead(status: number, head: ResponseHead): boolean {
    this.status = status;
    this.headers = endToEndHeaders(head.headers);
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.bytes += chunk.length;
    if (this.bytes > this.maxBodyBytes) {
      // Not from inside the connection's callback: abort() once it has returned.
      queueMicrotask(() => this.abort(`the answer from ${this.upstream} is larger than ${this.maxBodyBytes} bytes`));
      return false;
    }
    this.chunks.push(Buffer.from(chunk));
    return true;
  }

  onEnd(): void {
    if (!this.settle()) return;
    this.resolve({ status: this.status, headers: this.headers, body: Buffer.concat(this.chunks, this.bytes) });
  }

  onError(err: UpstreamError): void {
    if (this.settle()) this.reject(err);
  }

  onBodyDrain(): void {
    // A GET has no body to write.
  }

  private abort(why: string): void {
    if (!this.settle()) return;
    this.call?.abort();
    this.reject(new Error(why));
  }

  /** True the first time: the one outcome this fetch has. */
  private settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    if (this.timer !== null) clearTimeout(this.timer);
    return true;
  }
}
