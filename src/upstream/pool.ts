/**
 * A keep-alive pool of HTTP/1.1 connections to one upstream origin, for one worker process: a
 * connection limit, a bounded FIFO wait queue, connect/headers/body timeouts and idle reaping, all
 * driven by one coarse sweep timer per pool (no timer, closure or Promise per request).
 */
import { performance } from 'node:perf_hooks';
import net from 'node:net';
import tls from 'node:tls';
import { UpstreamCall, type CallHost, type UpstreamHandler } from './call.js';
import { UpstreamConnection, type ConnectionHost } from './connection.js';
import type { RequestBody } from './upstream-request-head.js';
import { SweepTimer } from '../sweep-timer.js';

export interface UpstreamTlsOptions {
  /** Trusted CA certificate(s) (PEM), instead of Node's bundled roots: for a private CA. */
  ca?: string | Buffer | Array<string | Buffer>;
  /** Client certificate (PEM) presented to an upstream that asks for one. */
  cert?: string | Buffer;
  key?: string | Buffer;
  /** SNI name and the name the certificate must carry; default: the origin's host unless it is an IP literal. */
  servername?: string;
  /** Default true. False accepts any certificate: for tests, never in production. */
  rejectUnauthorized?: boolean;
}

export interface UpstreamPoolOptions {
  /** `http://host:port` or `https://host:port`, no path. */
  origin: string;
  /** Most sockets open to the origin at once (default 256). */
  connections?: number;
  /** Most calls waiting for a socket when all are busy (default 1024); more fail with QUEUE_FULL. */
  maxQueue?: number;
  /** TCP connect plus TLS handshake (default 5000). */
  connectTimeoutMs?: number;
  /** From request() to the answer's head, queue wait and connect included (default 30000). */
  headersTimeoutMs?: number;
  /** Longest silence while reading the answer body, or while the upstream does not read the request body (default 30000). */
  bodyTimeoutMs?: number;
  /** Idle sockets are closed after this long (default 4000, under the common 5 s upstream keep-alive). */
  idleTimeoutMs?: number;
  /** Largest answer head (status line and headers; trailers too) (default 16384, as Node's). */
  maxResponseHeaderBytes?: number;
  tls?: UpstreamTlsOptions;
}

export interface UpstreamPoolStats {
  /** Open or connecting sockets. */
  connections: number;
  idle: number;
  queued: number;
}

const DEFAULTS = {
  connections: 256,
  maxQueue: 1024,
  connectTimeoutMs: 5000,
  headersTimeoutMs: 30_000,
  bodyTimeoutMs: 30_000,
  idleTimeoutMs: 4000,
  maxResponseHeaderBytes: 16 * 1024,
};

export class UpstreamPool implements ConnectionHost, CallHost {
  readonly origin: string;
  readonly host: string;
  readonly port: number;
  readonly hostLine: string;
  readonly tlsOptions: tls.ConnectionOptions | null;
  tlsSession: Buffer | undefined = undefined;
  readonly maxConnections: number;
  readonly maxQueue: number;
  readonly connectTimeoutMs: number;
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly maxResponseHeaderBytes: number;
  closing = false;
  now = performance.now();

  private readonly connections: UpstreamConnection[] = [];
  /** Idle sockets, the most recently used last (taken first: the others age out). */
  private readonly idle: UpstreamConnection[] = [];
  private queueHead: UpstreamCall | null = null;
  private queueTail: UpstreamCall | null = null;
  private queueLength = 0;
  private readonly sweeper: SweepTimer;
  private sweepQueued = false;
  private failing: UpstreamCall[] = [];
  private failFlushQueued = false;
  private onEmpty: (() => void) | null = null;

  constructor(options: UpstreamPoolOptions) {
    const url = parseOrigin(options.origin);
    const https = url.protocol === 'https:';
    this.origin = url.origin;
    this.host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    this.port = url.port === '' ? (https ? 443 : 80) : Number(url.port);
    this.hostLine = ` HTTP/1.1\r\nhost: ${url.host}`;
    this.maxConnections = positive(options, 'connections');
    this.maxQueue = positive(options, 'maxQueue', true);
    this.connectTimeoutMs = positive(options, 'connectTimeoutMs');
    this.headersTimeoutMs = positive(options, 'headersTimeoutMs');
    this.bodyTimeoutMs = positive(options, 'bodyTimeoutMs');
    this.idleTimeoutMs = positive(options, 'idleTimeoutMs');
    this.maxResponseHeaderBytes = positive(options, 'maxResponseHeaderBytes');
    if (!https && options.tls !== undefined) throw new Error(`upstream pool ${options.origin}: tls options given for an http origin`);
    this.tlsOptions = https ? tlsConnectOptions(this.host, this.port, options.tls ?? {}) : null;
    const shortest = Math.min(this.connectTimeoutMs, this.headersTimeoutMs, this.bodyTimeoutMs, this.idleTimeoutMs);
    this.sweeper = new SweepTimer(Math.max(5, Math.min(250, Math.floor(shortest / 20))), this.sweepAfterPoll);
  }

  /**
   * Sends a request. `headers` are the end-to-end request headers, [name, value, ...]: the pool
   * writes Host (the origin's authority) and the framing itself. `body`: null, the whole body, or
   * `{ length }` for a body streamed with call.writeBody/endBody (length -1: unknown, sent chunked).
   * Positional arguments spare the caller an options object per request.
   */
  request(method: string, path: string, headers: readonly string[], body: RequestBody, handler: UpstreamHandler): UpstreamCall {
    if (!this.sweeper.running) this.startSweep();
    let whole: Buffer | null = null;
    let framing = -2;
    if (body !== null) {
      if (body instanceof Uint8Array) {
        whole = body;
        framing = body.length;
      } else {
        framing = body.length < 0 ? -1 : body.length;
      }
    }
    const call = new UpstreamCall(this, method, path, headers, whole, framing, handler);
    if (this.closing) {
      call.failSoon('CLOSED', 'the upstream pool is closed');
      return call;
    }
    const idle = this.idle.pop();
    if (idle !== undefined) {
      idle.idleIndex = -1;
      idle.assign(call);
    } else if (this.connections.length < this.maxConnections) {
      this.openFor(call);
    } else if (this.queueLength < this.maxQueue) {
      this.enqueue(call, false);
    } else {
      call.failSoon('QUEUE_FULL', `all ${this.maxConnections} connections to the upstream are busy and ${this.maxQueue} requests wait`);
    }
    return call;
  }

  stats(): UpstreamPoolStats {
    return { connections: this.connections.length, idle: this.idle.length, queued: this.queueLength };
  }

  /** Takes no new calls; waiting ones fail with CLOSED, running ones finish; resolves when every socket is closed. */
  close(): Promise<void> {
    this.closing = true;
    this.failQueued();
    for (let i = this.idle.length - 1; i >= 0; i--) this.idle[i]!.destroy();
    for (let i = this.connections.length - 1; i >= 0; i--) {
      const conn = this.connections[i];
      if (conn !== undefined && !conn.connected && conn.call === null) conn.destroy();
    }
    if (this.connections.length === 0) {
      this.sweeper.stop();
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.onEmpty = resolve;
    });
  }

  /** Closes everything now; every waiting and running call fails with CLOSED. */
  destroy(): void {
    this.closing = true;
    this.failQueued();
    for (let i = this.connections.length - 1; i >= 0; i--) {
      this.connections[i]?.fail('CLOSED', 'the upstream pool was closed', undefined);
    }
    this.sweeper.stop();
  }

  // ---- ConnectionHost / CallHost ------------------------------------------------------------------

  connectionFree(conn: UpstreamConnection): void {
    if (this.closing) {
      conn.destroy();
      return;
    }
    const next = this.dequeue();
    if (next !== null) {
      conn.assign(next);
      return;
    }
    conn.idleSince = this.now;
    conn.idleIndex = this.idle.length;
    this.idle.push(conn);
  }

  connectionGone(conn: UpstreamConnection): void {
    const list = this.connections;
    const last = list.pop()!;
    if (last !== conn) {
      list[conn.index] = last;
      last.index = conn.index;
    }
    conn.index = -1;
    if (conn.idleIndex >= 0) {
      const idle = this.idle;
      const lastIdle = idle.pop()!;
      if (lastIdle !== conn) {
        idle[conn.idleIndex] = lastIdle;
        lastIdle.idleIndex = conn.idleIndex;
      }
      conn.idleIndex = -1;
    }
    if (list.length === 0 && this.onEmpty !== null) {
      const resolve = this.onEmpty;
      this.onEmpty = null;
      this.sweeper.stop();
      resolve();
    }
  }

  retryCall(call: UpstreamCall): void {
    call.requeued();
    if (this.connections.length < this.maxConnections && !this.closing) this.openFor(call);
    else this.enqueue(call, true);
  }

  /** Gives waiting calls the sockets that became available. */
  pump(): void {
    while (this.queueHead !== null && !this.closing) {
      const idle = this.idle.pop();
      if (idle !== undefined) {
        idle.idleIndex = -1;
        idle.assign(this.dequeue()!);
      } else if (this.connections.length < this.maxConnections) {
        this.openFor(this.dequeue()!);
      } else {
        return;
      }
    }
  }

  unqueue(call: UpstreamCall): void {
    if (!call.queued) return;
    call.queued = false;
    const { prev, next } = call;
    if (prev === null) this.queueHead = next;
    else prev.next = next;
    if (next === null) this.queueTail = prev;
    else next.prev = prev;
    call.prev = null;
    call.next = null;
    this.queueLength--;
  }

  failLater(call: UpstreamCall): void {
    this.failing.push(call);
    if (this.failFlushQueued) return;
    this.failFlushQueued = true;
    queueMicrotask(this.flushFailures);
  }

  // ---- internals ---------------------------------------------------------------------------------

  private openFor(call: UpstreamCall): void {
    const conn = new UpstreamConnection(this);
    conn.index = this.connections.length;
    this.connections.push(conn);
    conn.assign(call);
  }

  private enqueue(call: UpstreamCall, first: boolean): void {
    call.queued = true;
    this.queueLength++;
    if (this.queueTail === null) {
      this.queueHead = this.queueTail = call;
    } else if (first) {
      call.next = this.queueHead;
      this.queueHead!.prev = call;
      this.queueHead = call;
    } else {
      call.prev = this.queueTail;
      this.queueTail.next = call;
      this.queueTail = call;
    }
  }

  private dequeue(): UpstreamCall | null {
    const call = this.queueHead;
    if (call !== null) this.unqueue(call);
    return call;
  }

  private failQueued(): void {
    let call = this.queueHead;
    while (call !== null) {
      const next = call.next;
      call.failNow('CLOSED', 'the upstream pool was closed', undefined);
      call = next;
    }
  }

  private readonly flushFailures = (): void => {
    this.failFlushQueued = false;
    const failing = this.failing;
    this.failing = [];
    for (let i = 0; i < failing.length; i++) failing[i]!.deliverPendingError();
  };

  /** The clock the deadlines are read against is refreshed first: it stood still while no sweep ran. */
  private startSweep(): void {
    this.now = performance.now();
    this.sweeper.start();
  }

  /**
   * The interval fires in the timers phase, before the loop polls for I/O. After a stall (a long GC,
   * a synchronous task) an answer that arrived meanwhile is still unread there, and its deadline has
   * passed by the clock: the sweep runs in the check phase instead, after the poll phase has read it.
   */
  private readonly sweepAfterPoll = (): void => {
    if (this.sweepQueued) return;
    this.sweepQueued = true;
    setImmediate(this.sweep);
  };

  private readonly sweep = (): void => {
    this.sweepQueued = false;
    const now = (this.now = performance.now());
    let call = this.queueHead;
    while (call !== null && call.deadline <= now) {
      const next = call.next;
      call.failNow('QUEUE_TIMEOUT', `no connection to the upstream became free within ${this.headersTimeoutMs} ms`, undefined);
      call = next;
    }
    // Backwards: a connection closed here is swapped with the last one, which was already checked.
    for (let i = this.connections.length - 1; i >= 0; i--) {
      const conn = this.connections[i];
      if (conn !== undefined) conn.checkTimeouts(now);
    }
    this.pump();
    if (this.connections.length === 0 && this.queueLength === 0) this.sweeper.stop();
  };
}

function parseOrigin(origin: string): URL {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    throw new Error(`upstream pool: "${origin}" is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new Error(`upstream pool ${origin}: the scheme must be http or https, not ${url.protocol.slice(0, -1)}`);
  }
  if ((url.pathname !== '/' && url.pathname !== '') || url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
    throw new Error(`upstream pool ${origin}: an origin is scheme://host[:port], without path, query or credentials`);
  }
  return url;
}

function positive(options: UpstreamPoolOptions, key: keyof typeof DEFAULTS, zeroAllowed = false): number {
  const value = options[key] ?? DEFAULTS[key];
  if (!Number.isInteger(value) || value < (zeroAllowed ? 0 : 1)) {
    throw new Error(`upstream pool ${options.origin}: ${key} must be an integer ${zeroAllowed ? '>= 0' : '>= 1'}, not ${String(value)}`);
  }
  return value;
}

export function tlsConnectOptions(host: string, port: number, options: UpstreamTlsOptions): tls.ConnectionOptions {
  const name = options.servername ?? host;
  // SNI carries host names only (RFC 6066 3): an address, the host's or a serverName's, is checked
  // against the certificate (its IP SAN) without being sent.
  const address = net.isIP(name) !== 0;
  return {
    host,
    port,
    servername: address ? undefined : name,
    ...(address && name !== host ? { checkServerIdentity: (_host: string, cert: tls.PeerCertificate) => tls.checkServerIdentity(name, cert) } : {}),
    ca: options.ca,
    cert: options.cert,
    key: options.key,
    rejectUnauthorized: options.rejectUnauthorized ?? true,
    ALPNProtocols: ['http/1.1'],
  };
}
