/**
 * One keep-alive socket to the upstream (TCP, or TLS for https) and the call it carries, if any.
 * Its listeners are bound once per connection; nothing here allocates per request but the head
 * string and the views of the answer.
 */
import net from 'node:net';
import tls from 'node:tls';
import type { UpstreamErrorCode } from './call-errors.js';
import { serializeHead } from './upstream-request-head.js';
import { PARSE_FAILED, ResponseParser, type ResponseHead, type ResponseSink } from './response-parser.js';
import type { CallHost, UpstreamCall } from './call.js';

/** An aborted answer with at most this many body bytes left is read and dropped to keep its socket. */
export const DRAIN_LIMIT = 64 * 1024;
/**
 * ... and only for this long, then the socket is closed. The drain pays for a rest that is in flight
 * or follows the head at once: measured on loopback (200 aborts each), a 2 KB or 64 KiB rest written
 * right after the head is read within 0.5 ms of abort() (median 4-16 µs); across a network it comes
 * about one one-way trip later, well under 100 ms on any path a gateway and its upstream share. A rest
 * that has not come by then is still being produced (an event stream, a slow handler): waiting for it
 * holds a pool slot and keeps the upstream working for nobody, while a new connection costs one round
 * trip (two or three with TLS).
 */
export const DRAIN_MS = 100;
/** Gap left between our idle reaping and an upstream's announced Keep-Alive timeout. */
const KEEP_ALIVE_MARGIN_MS = 1000;
/** Room for the request body in the socket before writeBody asks the caller to wait. */
const WRITE_HIGH_WATER_MARK = 64 * 1024;
/**
 * Each connection reads into one buffer of its own (net's `onread`): no Buffer allocated per read
 * and no stream machinery per read (measured: about a fifth of the client's CPU per request). The
 * views handed to the handler are valid until reading goes on: see UpstreamHandler.
 */
const READ_BUFFER_BYTES = 32 * 1024;

const enum Phase {
  Connecting,
  Idle,
  Busy,
  Closed,
}

/** What a connection needs from its pool. */
export interface ConnectionHost extends CallHost {
  readonly host: string;
  readonly port: number;
  /** ` HTTP/1.1\r\nhost: <authority>\r\n` */
  readonly hostLine: string;
  readonly tlsOptions: tls.ConnectionOptions | null;
  tlsSession: Buffer | undefined;
  readonly maxResponseHeaderBytes: number;
  readonly connectTimeoutMs: number;
  readonly bodyTimeoutMs: number;
  readonly idleTimeoutMs: number;
  readonly closing: boolean;
  /** The coarse clock of the deadline sweep (performance.now() at the last tick). */
  readonly now: number;
  /** The connection can take another call. */
  connectionFree(connection: UpstreamConnection): void;
  /** The connection is gone (already closed). */
  connectionGone(connection: UpstreamConnection): void;
  /** Gives waiting calls the sockets that became available. */
  pump(): void;
  /** Retries `call` on a fresh connection (the stale keep-alive race). */
  retryCall(call: UpstreamCall): void;
}

export class UpstreamConnection implements ResponseSink {
  /** Index in the pool's list of connections (swap-remove). */
  index = -1;
  /** Index in the pool's idle stack, -1 when not idle. */
  idleIndex = -1;
  call: UpstreamCall | null = null;
  /** Answers completed on this socket: a failure before the first one is no stale keep-alive race. */
  answered = 0;
  idleSince = 0;

  private phase = Phase.Connecting;
  private readonly socket: net.Socket;
  private readonly parser: ResponseParser;
  private readonly connectDeadline: number;
  private tcpConnected = false;
  private idleLimitMs: number;

  /** The current call's head arrived (its body, if any, is being read). */
  private headReceived = false;
  /** Every byte of the current request went into the socket. */
  private requestComplete = false;
  private executing = false;
  /** The handler asked to stop reading; the rest of the chunk waits here. */
  private readPaused = false;
  private pausedData: Buffer | null = null;
  private pausedOffset = 0;
  /** The call was aborted after its head: its small rest is read and dropped. */
  private draining = false;
  private drainBudget = 0;
  /** Closes the socket of a drain that outlasts DRAIN_MS (armed on abort only, never per request). */
  private drainTimer: NodeJS.Timeout | null = null;
  /** Data arrived since the last sweep; the sweep turns it into lastRead. */
  private readSeen = false;
  private lastRead = 0;
  /** When writeBody first had to wait for the socket (0: not waiting). */
  private writeWaitSince = 0;
  /** The answer is complete but the handler paused on its last bytes: onEnd waits for resume(). */
  private endDeferred = false;
  /** Bytes followed the answer in the read that completed it. */
  private strayAfterEnd = false;
  private pausedEnd = 0;
  private socketPaused = false;

  constructor(private readonly pool: ConnectionHost) {
    this.parser = new ResponseParser(this, pool.maxResponseHeaderBytes);
    this.idleLimitMs = pool.idleTimeoutMs;
    this.connectDeadline = pool.now + pool.connectTimeoutMs;
    const tlsOptions = pool.tlsOptions;
    const onread = { buffer: Buffer.allocUnsafeSlow(READ_BUFFER_BYTES), callback: this.onRead };
    if (tlsOptions === null) {
      this.socket = net.connect({ host: pool.host, port: pool.port, noDelay: true, writableHighWaterMark: WRITE_HIGH_WATER_MARK, onread } as net.NetConnectOpts);
      this.socket.on('connect', this.onConnected);
    } else {
      this.socket = tls.connect({ ...tlsOptions, session: pool.tlsSession, onread } as tls.ConnectionOptions);
      this.socket.setNoDelay(true);
      this.socket.on('connect', this.onTcpConnected);
      this.socket.on('secureConnect', this.onConnected);
      this.socket.on('session', this.onSession);
    }
    this.socket.on('end', this.onEnd);
    this.socket.on('error', this.onError);
    this.socket.on('close', this.onClose);
    this.socket.on('drain', this.onDrain);
  }

  get connected(): boolean {
    return this.phase === Phase.Idle || this.phase === Phase.Busy;
  }

  get closed(): boolean {
    return this.phase === Phase.Closed;
  }

  // ---- calls ------------------------------------------------------------------------------------

  /** Takes `call`: sends it now when connected, otherwise once connected. */
  assign(call: UpstreamCall): void {
    this.call = call;
    call.conn = this;
    if (this.phase === Phase.Idle) this.send(call);
  }

  /** The call no longer waits for this connecting socket (aborted, or its deadline passed). */
  unbind(call: UpstreamCall): void {
    if (this.call !== call) return;
    this.call = null;
    call.conn = null;
  }

  private send(call: UpstreamCall): void {
    const head = serializeHead(call.method, call.path, this.pool.hostLine, call.headers, call.framing);
    if (head === null) {
      this.call = null;
      call.conn = null;
      this.phase = Phase.Idle;
      call.failSoon('BAD_REQUEST', 'the request has a malformed method or target, or a header with CR, LF, NUL or bytes that are not UTF-8');
      this.pool.connectionFree(this);
      return;
    }
    this.phase = Phase.Busy;
    this.headReceived = false;
    this.readPaused = false;
    this.endDeferred = false;
    this.draining = false;
    this.writeWaitSince = 0;
    this.parser.start(call.method === 'HEAD');
    call.sent();
    const socket = this.socket;
    const body = call.body;
    if (body !== null) {
      socket.cork();
      socket.write(head);
      socket.write(body);
      socket.uncork();
      this.requestComplete = true;
    } else if (call.framing === -2) {
      socket.write(head);
      this.requestComplete = true;
    } else {
      this.requestComplete = false;
      socket.cork();
      socket.write(head);
      const pending = call.takePendingBody();
      if (pending !== null) {
        for (let i = 0; i < pending.length; i++) this.writeChunk(pending[i]!, call.framing === -1);
      }
      if (call.bodyEnded) this.writeBodyEnd(call);
      socket.uncork();
      if (call.wantDrain && !socket.writableNeedDrain) {
        call.wantDrain = false;
        call.handler.onBodyDrain();
      }
    }
  }

  /** A streamed body chunk of the current call; false when the caller should wait for onBodyDrain. */
  writeBody(call: UpstreamCall, chunk: Buffer): boolean {
    if (this.phase !== Phase.Busy || this.call !== call) return true;
    const ok = this.writeChunk(chunk, call.framing === -1);
    if (!ok) {
      call.wantDrain = true;
      if (this.writeWaitSince === 0) this.writeWaitSince = this.pool.now;
    }
    return ok;
  }

  private writeChunk(chunk: Buffer, chunked: boolean): boolean {
    if (!chunked) return this.socket.write(chunk);
    if (chunk.length === 0) return true;
    const socket = this.socket;
    socket.cork();
    socket.write(chunk.length.toString(16) + '\r\n');
    socket.write(chunk);
    const ok = socket.write('\r\n');
    socket.uncork();
    return ok;
  }

  /** The streamed body is complete. */
  writeBodyEnd(call: UpstreamCall): void {
    if (this.call !== call || this.phase !== Phase.Busy) return;
    if (call.framing === -1) this.socket.write('0\r\n\r\n');
    this.requestComplete = true;
  }

  resume(call: UpstreamCall): void {
    if (this.call !== call || !this.readPaused) return;
    this.readPaused = false;
    this.lastRead = this.pool.now;
    // Inside execute: the loop in feed() goes on by itself.
    if (this.executing) return;
    if (this.endDeferred) {
      this.finishDeferredEnd();
      return;
    }
    const data = this.pausedData;
    if (data !== null) {
      this.pausedData = null;
      this.feed(data, this.pausedOffset, this.pausedEnd);
    }
    if (!this.readPaused) this.resumeSocket();
  }

  /** The handler is done with its call: drop the socket, or drain a small rest of the answer to keep it. */
  abort(call: UpstreamCall): void {
    if (this.call !== call) return;
    this.call = null;
    call.conn = null;
    if (this.endDeferred) {
      // The answer was complete already.
      this.endDeferred = false;
      this.readPaused = false;
      this.answerComplete(this.strayAfterEnd);
      return;
    }
    const remaining = this.parser.knownRemaining;
    const drainable =
      this.headReceived &&
      this.requestComplete &&
      this.parser.keepAlive &&
      !this.pool.closing &&
      (remaining >= 0 ? remaining <= DRAIN_LIMIT : !this.parser.untilClose);
    if (!drainable) {
      this.destroy();
      return;
    }
    this.draining = true;
    this.drainBudget = DRAIN_LIMIT;
    this.lastRead = this.pool.now;
    this.drainTimer = setTimeout(this.onDrainDeadline, DRAIN_MS).unref();
    if (!this.readPaused) return;
    this.readPaused = false;
    if (this.executing) return;
    const data = this.pausedData;
    if (data !== null) {
      this.pausedData = null;
      this.feed(data, this.pausedOffset, this.pausedEnd);
    }
    if (this.phase !== Phase.Closed) this.resumeSocket();
  }

  // ---- the answer (ResponseSink) ----------------------------------------------------------------

  onResponseHead(head: ResponseHead): boolean {
    const call = this.call!;
    this.headReceived = true;
    this.lastRead = this.pool.now;
    this.readSeen = false;
    const go = call.handler.onHead(head.status, head);
    if (this.call !== call) return this.draining;
    if (!go) this.readPaused = true;
    return go;
  }

  onResponseBody(chunk: Buffer): boolean {
    if (this.draining) {
      this.drainBudget -= chunk.length;
      if (this.drainBudget >= 0) return true;
      this.destroy();
      return false;
    }
    const call = this.call!;
    const go = call.handler.onData(chunk);
    if (this.call !== call) return this.draining;
    if (!go) this.readPaused = true;
    return go;
  }

  onResponseEnd(): void {
    this.answered++;
    const call = this.call;
    if (call === null) return;
    if (this.readPaused) {
      // The views of the last bytes must stay valid until the handler resumes: the socket must not read into them.
      this.endDeferred = true;
      return;
    }
    this.call = null;
    call.conn = null;
    call.ended();
  }

  private finishDeferredEnd(): void {
    this.endDeferred = false;
    const call = this.call!;
    this.call = null;
    call.conn = null;
    call.ended();
    if (this.phase !== Phase.Closed) this.answerComplete(this.strayAfterEnd);
  }

  // ---- socket events ----------------------------------------------------------------------------

  private readonly onTcpConnected = (): void => {
    this.tcpConnected = true;
  };

  private readonly onSession = (session: Buffer): void => {
    this.pool.tlsSession = session;
  };

  private readonly onConnected = (): void => {
    if (this.phase !== Phase.Connecting) return;
    this.tcpConnected = true;
    this.phase = Phase.Idle;
    const call = this.call;
    if (call !== null) this.send(call);
    else this.pool.connectionFree(this);
  };

  /** net's onread callback: `length` new bytes at the start of this connection's read buffer. */
  private readonly onRead = (length: number, buffer: Buffer): boolean => {
    if (this.phase !== Phase.Busy || (this.call === null && !this.draining) || this.endDeferred) {
      // Bytes nobody asked for (after an answer, or on an idle socket): never read as a next answer.
      this.destroy();
      return false;
    }
    this.readSeen = true;
    const call = this.call;
    if (call !== null) call.responseStarted = true;
    this.feed(buffer, 0, length);
    return !this.socketPaused;
  };

  private feed(data: Buffer, offset: number, end: number): void {
    for (;;) {
      this.executing = true;
      let stop: number;
      try {
        stop = this.parser.execute(data, offset, end);
      } catch (err) {
        // A handler threw: the pool stays consistent (its call is dropped with the socket), the error goes on up.
        this.executing = false;
        const call = this.call;
        this.call = null;
        if (call !== null) call.conn = null;
        this.destroy();
        throw err;
      }
      this.executing = false;
      if (this.phase === Phase.Closed) return;
      if (stop === PARSE_FAILED) {
        this.fail('BAD_RESPONSE', `the upstream sent an invalid response: ${this.parser.error}`, undefined);
        return;
      }
      if (this.parser.complete) {
        this.strayAfterEnd = stop < end;
        if (!this.endDeferred) this.answerComplete(this.strayAfterEnd);
        else if (this.readPaused) this.pauseSocket();
        else this.finishDeferredEnd();
        return;
      }
      if (this.readPaused) {
        if (stop < end) {
          this.pausedData = data;
          this.pausedOffset = stop;
          this.pausedEnd = end;
        }
        this.pauseSocket();
        return;
      }
      if (stop >= end) return;
      // Paused and resumed from inside a callback.
      offset = stop;
    }
  }

  private pauseSocket(): void {
    if (this.socketPaused) return;
    this.socketPaused = true;
    this.socket.pause();
  }

  private resumeSocket(): void {
    if (!this.socketPaused || this.phase === Phase.Closed) return;
    this.socketPaused = false;
    this.socket.resume();
  }

  /** The answer was read completely; `stray`: bytes followed it in the same read. */
  private answerComplete(stray: boolean): void {
    if (this.draining) this.stopDraining();
    this.pausedData = null;
    this.readPaused = false;
    this.resumeSocket();
    const keepAliveS = this.parser.keepAliveTimeoutS;
    if (keepAliveS >= 0) {
      this.idleLimitMs = Math.min(this.pool.idleTimeoutMs, Math.max(keepAliveS * 1000 - KEEP_ALIVE_MARGIN_MS, keepAliveS * 500));
    }
    if (stray || !this.parser.keepAlive || !this.requestComplete || this.pool.closing || this.idleLimitMs <= 0) {
      this.destroy();
      return;
    }
    this.phase = Phase.Idle;
    this.pool.connectionFree(this);
  }

  private stopDraining(): void {
    this.draining = false;
    if (this.drainTimer === null) return;
    clearTimeout(this.drainTimer);
    this.drainTimer = null;
  }

  /** The rest of an aborted answer did not come in time: it is not in flight but still being produced. */
  private readonly onDrainDeadline = (): void => {
    this.drainTimer = null;
    if (this.draining) this.destroy();
  };

  private readonly onEnd = (): void => {
    if (this.phase === Phase.Busy && this.call !== null && this.parser.endOfStream()) {
      // A close-delimited body: the close completed it.
      this.destroy();
      return;
    }
    this.fail('RESET', 'the upstream closed the connection before the answer was complete', undefined);
  };

  private readonly onError = (err: NodeJS.ErrnoException): void => {
    if (this.phase === Phase.Connecting) {
      const [code, message] = connectFailure(err, this.pool.tlsOptions !== null && this.tcpConnected);
      this.fail(code, message, err);
      return;
    }
    // TLS 1.3: a server that refuses the client's certificate (or none) says so with an alert after
    // the client took the handshake for done, so it arrives here, before any answer on this socket.
    // It is the handshake's failure (502 naming it, logged and counted as one), not a reset.
    if (this.pool.tlsOptions !== null && this.answered === 0 && !this.headReceived && err.code?.startsWith('ERR_SSL_') === true) {
      const [code, message] = connectFailure(err, true);
      this.fail(code, message, err);
      return;
    }
    this.fail('RESET', `the upstream connection failed: ${err.code ?? err.message}`, err);
  };

  private readonly onClose = (): void => {
    if (this.phase !== Phase.Closed) this.fail('RESET', 'the upstream closed the connection before the answer was complete', undefined);
  };

  private readonly onDrain = (): void => {
    this.writeWaitSince = 0;
    const call = this.call;
    if (call === null || !call.wantDrain) return;
    call.wantDrain = false;
    call.handler.onBodyDrain();
  };

  // ---- failure and timeouts ---------------------------------------------------------------------

  /** Closes the connection; its call (if any) fails with `code`, or is retried once (stale keep-alive race). */
  fail(code: UpstreamErrorCode, message: string, cause: unknown): void {
    if (this.endDeferred) {
      // The answer was complete: the handler gets its end (nothing will overwrite its views now).
      this.close();
      this.finishDeferredEnd();
      this.pool.pump();
      return;
    }
    const call = this.call;
    const connecting = this.phase === Phase.Connecting;
    this.call = null;
    this.close();
    if (call !== null) {
      call.conn = null;
      if (code === 'RESET' && !connecting && this.answered > 0 && !this.parser.started && call.mayRetryStale()) {
        // The retry goes first, before waiting calls take the freed slot.
        this.pool.retryCall(call);
      } else {
        call.failNow(code, message, cause);
      }
    }
    this.pool.pump();
  }

  /** Closes the socket at once; the pool forgets the connection and gives its slot to a waiting call. */
  destroy(): void {
    if (this.close()) this.pool.pump();
  }

  private close(): boolean {
    if (this.phase === Phase.Closed) return false;
    this.phase = Phase.Closed;
    this.pausedData = null;
    if (this.draining) this.stopDraining();
    this.socket.destroy();
    this.pool.connectionGone(this);
    return true;
  }

  /** Called by the pool's sweep with its clock. */
  checkTimeouts(now: number): void {
    switch (this.phase) {
      case Phase.Connecting: {
        if (now >= this.connectDeadline) {
          this.fail('CONNECT_TIMEOUT', `connecting to the upstream took longer than ${this.pool.connectTimeoutMs} ms`, undefined);
          return;
        }
        const call = this.call;
        if (call !== null && now >= call.deadline) {
          // The call's time ran out while this socket was still connecting; the socket may serve another.
          this.unbind(call);
          call.failNow('CONNECT_TIMEOUT', 'the upstream did not accept the connection before the request timed out', undefined);
        }
        return;
      }
      case Phase.Idle:
        if (now - this.idleSince >= this.idleLimitMs) this.destroy();
        return;
      case Phase.Busy: {
        if (this.headReceived || this.draining) {
          if (this.readPaused || this.readSeen) {
            this.readSeen = false;
            this.lastRead = now;
          } else if (now - this.lastRead >= this.pool.bodyTimeoutMs) {
            this.fail('BODY_TIMEOUT', `the upstream sent no answer bytes for ${this.pool.bodyTimeoutMs} ms`, undefined);
          }
          return;
        }
        const call = this.call;
        if (call === null) return;
        if (!this.requestComplete) {
          // Sending a streamed body: the answer's clock starts when it is complete; meanwhile the upstream must keep reading.
          if (this.writeWaitSince !== 0 && now - this.writeWaitSince >= this.pool.bodyTimeoutMs) {
            this.fail('BODY_TIMEOUT', `the upstream read none of the request body for ${this.pool.bodyTimeoutMs} ms`, undefined);
          }
          return;
        }
        if (now >= call.deadline) this.fail('HEADERS_TIMEOUT', 'the upstream did not answer in time', undefined);
        return;
      }
      default:
    }
  }
}

/** The error code of a failed connect. */
function connectFailure(err: NodeJS.ErrnoException, duringTls: boolean): [UpstreamErrorCode, string] {
  switch (err.code) {
    case 'ECONNREFUSED':
      return ['CONNECT_REFUSED', 'the upstream refused the connection'];
    case 'ETIMEDOUT':
      return ['CONNECT_TIMEOUT', 'connecting to the upstream timed out'];
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
    case 'EADDRNOTAVAIL':
      return ['CONNECT_FAILED', `the upstream could not be reached (${err.code})`];
    default:
      if (duringTls) return ['TLS', `the TLS handshake with the upstream failed: ${err.code ?? ''} ${err.message}`];
      return ['CONNECT_FAILED', `connecting to the upstream failed: ${err.code ?? err.message}`];
  }
}
