/**
 * Accept: the checks a request head must pass before anything else looks at it (limits, framing,
 * characters, encoded slashes, path normalization), then who the client is (trustedProxies) and the
 * forwarding headers the upstream will get. Returns the gateway's refusal, or null to route it.
 * Synchronous, inside the transport's handler: the head is only valid now.
 */
import type { GatewayConfig } from '../config/types.js';
import { problem, type ProblemAnswer } from '../exchange/answer.js';
import type { RequestContext } from '../exchange/context.js';
import { dropTrailingSlash, isPlainPath, normalizePath } from '../http/normalize-path.js';
import type { RequestHead } from '../http/client-request-head.js';
import { hasSlashLookalike, isTargetText } from '../http/request-target.js';
import { TrustedProxies } from '../http/trusted-proxies.js';
import { DEFAULT_MAX_URL_BYTES, targetTooLong } from '../edge/request-line.js';

const HSTS: readonly string[] = ['strict-transport-security'];

export class AcceptPhase {
  readonly trust: TrustedProxies;
  private readonly rejectEncodedSlashes: boolean;
  private readonly maxHeaderBytes: number;
  private readonly maxBodyBytes: number;
  private readonly maxUrlBytes: number;
  private readonly chunkedBodies: boolean;
  /** Strict-Transport-Security for answers over TLS; null when not configured. Follows a reload (setHsts). */
  private hsts: string | null;
  /**
   * The gateway terminates TLS itself: an upstream's Strict-Transport-Security is kept off answers on
   * its plain port (RFC 6797 7.2: never over a non-secure transport), unless a trusted proxy says the
   * client's connection was https. Without `tls` a front terminates it, and the plain answers are that
   * front's to pass on over TLS.
   */
  private readonly terminatesTls: boolean;

  constructor(
    config: GatewayConfig,
    /** `1.1 <name>`, appended to the client's Via. */
    private readonly via: string,
  ) {
    this.trust = new TrustedProxies(config.trustedProxies);
    this.rejectEncodedSlashes = config.encodedSlashes === 'reject';
    this.maxHeaderBytes = config.limits.maxHeaderBytes;
    this.maxBodyBytes = config.limits.maxBodyBytes;
    this.maxUrlBytes = config.limits.maxUrlBytes ?? DEFAULT_MAX_URL_BYTES;
    this.chunkedBodies = config.limits.chunkedRequestBodies !== false;
    this.hsts = hstsValue(config);
    this.terminatesTls = config.tls !== undefined;
  }

  /** A reloaded config's tls.hstsMaxAgeS, for answers from now on. */
  setHsts(config: GatewayConfig): void {
    this.hsts = hstsValue(config);
  }

  /** The refusal of a head that cannot go on (its `close`: the connection is closed after it), or null. */
  check(head: RequestHead, ctx: RequestContext): Refusal | null {
    this.addHsts(ctx);
    const tooLong = this.lengthRefusal(head.url, ctx.query);
    if (tooLong !== null) return tooLong;
    if (head.headerBytes > this.maxHeaderBytes) {
      return refuse(431, `the request headers are larger than ${this.maxHeaderBytes} bytes`);
    }
    // Bad framing or an ambiguous head leaves the connection untrustworthy: it is closed after the answer.
    if (head.badFraming) return refuse(400, 'conflicting or invalid Content-Length / Transfer-Encoding', true);
    if (head.transferEncoding !== undefined && !this.chunkedBodies) {
      return refuse(411, 'this gateway takes a request body only with a Content-Length, not chunked', true);
    }
    if (head.unsupportedCoding) {
      return refuse(501, 'the request body has a transfer coding other than chunked, which the gateway does not decode', true);
    }
    if (head.conflict !== '') return refuse(400, head.conflict, true);
    const path = this.routedPath(head.url, ctx.query);
    if (typeof path !== 'string') return path;
    ctx.path = path;
    return null;
  }

  /**
   * After routing: a declared Content-Length over limits.maxBodyBytes is 413. Checked once the request
   * is routed, as a chunked body found too large while it arrives is, so that both count under their
   * endpoint (and under no upstream: nothing was sent).
   */
  bodyRefusal(ctx: RequestContext): ProblemAnswer | null {
    return ctx.bodyLength > this.maxBodyBytes ? problem(413, `the request body is larger than ${this.maxBodyBytes} bytes`) : null;
  }

  /**
   * What the checks above make of a request target alone: the normalized path a request with it is
   * routed by, or its refusal. `url` is the path as received, `query` the raw query without "?".
   * For `gateway explain`, which has no head.
   */
  checkTarget(url: string, query: string): Refusal | string {
    return this.lengthRefusal(url, query) ?? this.routedPath(url, query);
  }

  /**
   * The normalized path a request target routes by, or its refusal: its characters, encoded slashes
   * and normalization, the length aside.
   */
  routedPath(url: string, query: string): Refusal | string {
    if (isPlainPath(url) && isTargetText(query)) return dropTrailingSlash(url);
    if (!isTargetText(url) || !isTargetText(query)) {
      return refuse(400, 'the request target holds characters that must be percent-encoded');
    }
    if (this.rejectEncodedSlashes && hasSlashLookalike(url)) {
      return refuse(400, 'the path holds a "\\" or an encoded "/" or "\\" (%2F, %5C), which an upstream could read as a segment boundary');
    }
    return normalizePath(url) ?? refuse(400, 'the request path is malformed or climbs above the root');
  }

  private lengthRefusal(url: string, query: string): Refusal | null {
    return targetTooLong(url, query, this.maxUrlBytes) ? refuse(414, `the request target is longer than ${this.maxUrlBytes} bytes`) : null;
  }


  /** Strict-Transport-Security among ctx's own answer headers when it came over TLS (hstsMaxAgeS). */
  addHsts(ctx: RequestContext): void {
    if (ctx.secure && this.hsts !== null) {
      ctx.addResponseHeader('strict-transport-security', this.hsts);
      // Only ours goes out: a browser reads the first of two (RFC 6797 8.1), which would be the upstream's.
      ctx.hideResponseHeaders(HSTS);
    }
  }

  /** The client's address per trustedProxies (rate limits key on it, logs show it). */
  clientAddress(ctx: RequestContext): string {
    return ctx.clientAddress === '' ? (ctx.clientAddress = this.trust.clientAddress(ctx.peer, ctx.forwardedFor)) : ctx.clientAddress;
  }

  /**
   * End-to-end request headers plus X-Forwarded-*, Via and, from a trusted proxy only, the client's
   * Forwarded, X-Real-IP and other X-Forwarded-* fields (docs/reference/forward.md). From any other peer the gateway speaks for
   * the client itself. Only for routed requests: nothing else goes upstream.
   */
  addForwardingHeaders(head: RequestHead, ctx: RequestContext): void {
    const headers = ctx.headers;
    const peer = ctx.peer;
    const host = head.view.host;
    if (this.trust.isTrusted(peer)) {
      headers.push('x-forwarded-for', head.xForwardedFor === undefined ? peer : `${head.xForwardedFor}, ${peer}`);
      const proto = head.xForwardedProto ?? (ctx.secure ? 'https' : 'http');
      headers.push('x-forwarded-proto', proto);
      if (!ctx.secure && this.terminatesTls && proto.trim().toLowerCase() !== 'https') ctx.hideResponseHeaders(HSTS);
      const forwardedHost = head.xForwardedHost ?? host;
      if (forwardedHost) headers.push('x-forwarded-host', forwardedHost);
      if (head.forwarded !== undefined) headers.push('forwarded', `${head.forwarded}, for=${forwardedNode(peer)}`);
      if (head.xRealIp !== undefined) headers.push('x-real-ip', head.xRealIp);
      const other = head.xForwardedOther;
      if (other !== null) for (let i = 0; i < other.length; i++) headers.push(other[i]!);
    } else {
      headers.push('x-forwarded-for', peer, 'x-forwarded-proto', ctx.secure ? 'https' : 'http');
      if (!ctx.secure && this.terminatesTls) ctx.hideResponseHeaders(HSTS);
      if (host) headers.push('x-forwarded-host', host);
    }
    headers.push('via', head.via === undefined || head.via === '' ? this.via : `${head.via}, ${this.via}`);
  }
}

/** A refusal of the accept phase; `close` when the connection cannot be trusted after it. */
export interface Refusal {
  readonly answer: ProblemAnswer;
  readonly close: boolean;
}

function hstsValue(config: GatewayConfig): string | null {
  return config.tls !== undefined && config.tls.hstsMaxAgeS > 0 ? `max-age=${config.tls.hstsMaxAgeS}` : null;
}

function refuse(status: number, detail: string, close = false): Refusal {
  return { answer: problem(status, detail), close };
}

/** A Forwarded `for=` node (RFC 7239 6): IPv6 is quoted and bracketed. */
function forwardedNode(address: string): string {
  return address.indexOf(':') === -1 ? address : `"[${address}]"`;
}
