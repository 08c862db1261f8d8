/**
 * Reads everything the data plane needs from a uWS request in one pass over its headers. uWS
 * invalidates the request when the handler returns, so this runs synchronously in the handler.
 */
import type { UwsRequest } from '../native/uws-types.js';
import { isValidHost } from './host-header.js';
import { readTransferCoding, TransferCoding } from './transfer-coding.js';

/** The headers a built-in endpoint may read; one reused object, valid only during the hook call. */
export interface HeaderView {
  accept: string | undefined;
  'accept-encoding': string | undefined;
  'content-type': string | undefined;
  host: string | undefined;
  'if-none-match': string | undefined;
  authorization: string | undefined;
  'user-agent': string | undefined;
  [name: string]: string | undefined;
}

/** A HeaderView with every field present (one hidden class) and unset. */
export function emptyHeaderView(): HeaderView {
  return {
    accept: undefined,
    'accept-encoding': undefined,
    'content-type': undefined,
    host: undefined,
    'if-none-match': undefined,
    authorization: undefined,
    'user-agent': undefined,
  };
}

export class RequestHead {
  method = '';
  /** The connection's peer address (set by the accept adapter). */
  peer = '';
  /** performance.now() when the request arrived (set by the accept adapter). */
  startedAt = 0;
  /** It arrived over TLS (set by the accept adapter). */
  secure = false;
  url = '';
  query = '';
  /** Sum of header name and value lengths (what limits.maxHeaderBytes bounds). */
  headerBytes = 0;
  /** Parsed Content-Length, -1 when absent. */
  contentLength = -1;
  /**
   * Conflicting Content-Length headers, a non-numeric one, Content-Length with Transfer-Encoding, or a
   * Transfer-Encoding whose last coding is not chunked or that lists chunked twice.
   */
  badFraming = false;
  /** Why the head is ambiguous and must be answered 400 (two Hosts, ...); '' when it is not. */
  conflict = '';
  transferEncoding: string | undefined = undefined;
  /** Transfer-Encoding lists a coding before the final chunked that the gateway does not decode (501). */
  unsupportedCoding = false;
  connection: string | undefined = undefined;
  /**
   * The connection is closed after the answer: the client's Connection header lists the "close"
   * option (RFC 9112 9.6), or the body comes chunked (see read()).
   */
  closeRequested = false;
  /**
   * The first Connection header is "close" and nothing else (any letter case): the form uWS 20.30
   * recognizes, closing the connection after the answer by itself without writing a Connection
   * header (native-notes.md).
   */
  libraryCloses = false;
  xForwardedFor: string | undefined = undefined;
  xForwardedProto: string | undefined = undefined;
  xForwardedHost: string | undefined = undefined;
  via: string | undefined = undefined;
  /** Forwarded (RFC 7239) and X-Real-IP: kept only from a trusted proxy (docs/reference/accept.md#trusted-proxies). */
  forwarded: string | undefined = undefined;
  xRealIp: string | undefined = undefined;
  /**
   * The client's other X-Forwarded-* fields (Port, Prefix, Ssl, Server, ...), flat [name, value, ...]:
   * frameworks build links and decide what is secure from them, so only a trusted proxy's go upstream.
   * Null when there are none.
   */
  xForwardedOther: string[] | null = null;
  /** End-to-end headers to forward, flat [name, value, ...]; a fresh array per request (the upstream pool may queue it). */
  forward: string[] = [];
  readonly view: HeaderView = emptyHeaderView();

  /** A request body follows the head. */
  get hasBody(): boolean {
    return this.contentLength > 0 || this.transferEncoding !== undefined;
  }

  private reset(): void {
    this.headerBytes = 0;
    this.contentLength = -1;
    this.badFraming = false;
    this.conflict = '';
    this.transferEncoding = undefined;
    this.unsupportedCoding = false;
    this.connection = undefined;
    this.closeRequested = false;
    this.libraryCloses = false;
    this.xForwardedFor = undefined;
    this.xForwardedProto = undefined;
    this.xForwardedHost = undefined;
    this.via = undefined;
    this.forwarded = undefined;
    this.xRealIp = undefined;
    this.xForwardedOther = null;
    this.forward = [];
    const view = this.view;
    view.accept = undefined;
    view['accept-encoding'] = undefined;
    view['content-type'] = undefined;
    view.host = undefined;
    view['if-none-match'] = undefined;
    view.authorization = undefined;
    view['user-agent'] = undefined;
  }

  /** Fills this object from `req` (reused across requests). */
  read(req: UwsRequest): this {
    this.reset();
    this.method = req.getCaseSensitiveMethod();
    this.url = req.getUrl();
    this.query = req.getQuery() ?? '';
    current = this;
    req.forEach(collectHeader);
    if (this.url.charCodeAt(0) !== 0x2f) this.readAbsoluteForm();
    const connection = this.connection;
    // What clients send, as they send it, names no header (callgrind: -500 instructions a request).
    if (connection === 'keep-alive') this.closeRequested = false;
    else if (connection === 'close') this.closeRequested = true;
    else if (connection !== undefined) {
      this.closeRequested = hasCloseOption(connection);
      dropConnectionNamed(this, connection);
    }
    if (this.transferEncoding !== undefined) {
      if (this.contentLength >= 0) this.badFraming = true;
      const coding = readTransferCoding(this.transferEncoding);
      if (coding === TransferCoding.Ambiguous) this.badFraming = true;
      else if (coding === TransferCoding.Unsupported) this.unsupportedCoding = true;
      // uWS 20.30 misreads chunk extensions and trailers (native-notes.md): where it and the client
      // disagree on where the body ends, the bytes after it are not the request the client meant to
      // send next. The connection is closed after the answer, so nothing more is read from it.
      this.closeRequested = true;
    }
    return this;
  }

  /**
   * "GET http://host/path HTTP/1.1" (RFC 9112 3.2.2): routed by its path; a Host header that names
   * another authority is a 400, since the two could be read differently along the way (docs/reference/accept.md#head-checks).
   * Anything else that does not start with "/" is left for path normalization to refuse.
   */
  private readAbsoluteForm(): void {
    const match = /^https?:\/\/([^/?#]*)/i.exec(this.url);
    if (match === null) return;
    const authority = match[1]!.toLowerCase();
    const host = this.view.host;
    if (host !== undefined && host.toLowerCase() !== authority) {
      this.conflict ||= 'the Host header names another authority than the request target';
    }
    this.view.host ??= authority;
    this.url = this.url.slice(match[0].length) || '/';
  }
}

let current: RequestHead;

const PLAIN_CONNECTION = new Set(['keep-alive', 'close']);

function combine(previous: string | undefined, value: string): string {
  return previous === undefined ? value : `${previous}, ${value}`;
}

/** uWS hands names lower-cased. Hop-by-hop headers are recorded, not forwarded (docs/reference/accept.md#request-headers). */
function collectHeader(name: string, value: string): void {
  const head = current;
  head.headerBytes += name.length + value.length;
  switch (name) {
    case 'content-length': {
      const length = parseContentLength(value);
      if (length < 0 || (head.contentLength >= 0 && head.contentLength !== length)) head.badFraming = true;
      else if (head.contentLength < 0) {
        head.contentLength = length;
        head.forward.push(name, value);
      }
      return;
    }
    case 'transfer-encoding':
      head.transferEncoding = combine(head.transferEncoding, value);
      return;
    case 'connection':
      if (head.connection === undefined) head.libraryCloses = value.length === 5 && value.toLowerCase() === 'close';
      head.connection = combine(head.connection, value);
      return;
    case 'host':
      // The upstream gets its own Host; the client's goes out as X-Forwarded-Host.
      if (head.view.host !== undefined) head.conflict ||= 'the request has more than one Host header';
      else if (!isValidHost(value)) head.conflict ||= 'the Host header is not a host and optional port';
      head.view.host = value;
      return;
    case 'x-forwarded-for':
      head.xForwardedFor = combine(head.xForwardedFor, value);
      return;
    case 'x-forwarded-proto':
      head.xForwardedProto ??= value;
      return;
    case 'x-forwarded-host':
      head.xForwardedHost ??= value;
      return;
    case 'via':
      head.via = combine(head.via, value);
      return;
    case 'forwarded':
      head.forwarded = combine(head.forwarded, value);
      return;
    case 'x-real-ip':
      head.xRealIp ??= value;
      return;
    case 'keep-alive':
    case 'te':
    case 'trailer':
    case 'upgrade':
    case 'expect':
      // uWS answers "Expect: 100-continue" itself, and the upstream client does not send Expect (the body is already on its way).
      return;
    case 'accept':
      head.view.accept = combine(head.view.accept, value);
      break;
    case 'content-type': {
      const previous = head.view['content-type'];
      if (previous === undefined) head.view['content-type'] = value;
      else if (previous !== value) head.conflict ||= 'the request has Content-Type headers with different values';
      else return; // the same value twice goes upstream once
      break;
    }
    case 'accept-encoding':
    case 'if-none-match':
    case 'authorization':
    case 'user-agent':
      head.view[name] ??= value;
      break;
    default:
      // Proxy-Connection, Proxy-Authorization, ...
      if (name.charCodeAt(0) === 0x70 && name.startsWith('proxy-')) return;
      if (name.charCodeAt(0) === 0x78 && name.startsWith('x-forwarded-')) {
        (head.xForwardedOther ??= []).push(name, value);
        return;
      }
  }
  head.forward.push(name, value);
}

/** Digits only, as RFC 9110 says; -1 otherwise. */
export function parseContentLength(value: string): number {
  const length = value.length;
  if (length === 0 || length > 15) return -1;
  let n = 0;
  for (let i = 0; i < length; i++) {
    const digit = value.charCodeAt(i) - 0x30;
    if (digit < 0 || digit > 9) return -1;
    n = n * 10 + digit;
  }
  return n;
}

const CLOSE_OPTION = /(?:^|,)[ \t]*close[ \t]*(?:,|$)/i;

/** Whether a Connection value lists the "close" option, in any letter case (no split: most values are "keep-alive"). */
export function hasCloseOption(connection: string): boolean {
  return CLOSE_OPTION.test(connection);
}

/**
 * Removes the headers the Connection header names (rare: only tokens other than close/keep-alive
 * count), the forwarding fields kept apart from `forward` (Via, X-Forwarded-*, Forwarded, X-Real-IP)
 * included: a field named there was meant for this hop alone (RFC 9110 7.6.1).
 */
function dropConnectionNamed(head: RequestHead, connection: string): void {
  const forward = head.forward;
  // The usual values name no header: no split per request.
  if (connection.length <= 10 && PLAIN_CONNECTION.has(connection.toLowerCase())) return;
  let named: string[] | null = null;
  for (const token of connection.split(',')) {
    const name = token.trim().toLowerCase();
    if (name === '' || name === 'close' || name === 'keep-alive') continue;
    (named ??= []).push(name);
  }
  if (named === null) return;
  for (const name of named) {
    if (name === 'via') head.via = undefined;
    else if (name === 'forwarded') head.forwarded = undefined;
    else if (name === 'x-real-ip') head.xRealIp = undefined;
    else if (name === 'x-forwarded-for') head.xForwardedFor = undefined;
    else if (name === 'x-forwarded-proto') head.xForwardedProto = undefined;
    else if (name === 'x-forwarded-host') head.xForwardedHost = undefined;
  }
  if (head.xForwardedOther !== null) withoutNamed(head.xForwardedOther, named);
  withoutNamed(forward, named);
}

/** Drops the [name, value] pairs of flat `list` whose name is among `named`, in place. */
function withoutNamed(list: string[], named: readonly string[]): void {
  let to = 0;
  for (let from = 0; from < list.length; from += 2) {
    if (named.includes(list[from]!)) continue;
    list[to++] = list[from]!;
    list[to++] = list[from + 1]!;
  }
  list.length = to;
}
