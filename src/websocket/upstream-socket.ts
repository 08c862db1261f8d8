/**
 * The upstream leg of a proxied WebSocket: the gateway's own RFC 6455 client over a net or tls socket.
 *
 * Why not the `ws` client, which this leg used first: measured with `npm run bench:ws` on this
 * project's 2-core machine, an upgrade through the gateway took 1.2 ms of worker time before the
 * client's 101 could go out, of which 0.4 ms was ws's constructor (Node's http.request) and most of
 * the 0.6 ms until 'open' was Node's HTTP client reading the 101 (docs/websocket.md has the figures).
 * Here the handshake is one string written at connect and one head parsed from the first read; a
 * refusal (any answer but 101) is read by the upstream client's strict response parser.
 *
 * Messages are relayed whole (FrameReader reassembles fragments); pings are answered here; a close
 * frame from the upstream is answered and reported at once (nothing may follow it); the upstream
 * breaking the protocol (a masked frame, bad UTF-8 in a text message, a message over maxPayload) is
 * answered with the close code that says so and reported as a violation.
 */
import crypto from 'node:crypto';
import net from 'node:net';
import tls from 'node:tls';
import { ResponseParser, PARSE_FAILED, type ResponseHead, type ResponseSink } from '../upstream/response-parser.js';
import { serializeHead } from '../upstream/upstream-request-head.js';
import { isFieldValue, isToken } from '../upstream/http-chars.js';
import { tlsConnectOptions, type UpstreamTlsOptions } from '../upstream/pool.js';
import { closePayload, encodeFrameInto, FrameBuffer, FrameReader, frameSize, handshakeKey, OPCODE_BINARY, OPCODE_CLOSE, OPCODE_PONG, OPCODE_TEXT, sendableCloseCode, type FrameSink } from './frames.js';

const GUID = '258EAFA5-E914-47DA-95CA-C5AB0DC85B11';
const STATUS_LINE = /^HTTP\/1\.[01] ([1-5]\d\d)(?: [^\r\n]*)?$/;
/**
 * Header lines (RFC 9112 5): a token, a colon, a field value (VCHAR, obs-text, SP, HTAB), CRLF
 * between lines. One test of the whole block rather than a token and a field-value check per line,
 * with the names lower-cased once (callgrind: upgraded() 8,634 -> 2,265 instructions per upgrade).
 */
const HEADER_LINES = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[\t\x20-\x7e\x80-\xff]*(?:\r\n[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[\t\x20-\x7e\x80-\xff]*)*$/;
const CRLFCRLF = Buffer.from('\r\n\r\n', 'latin1');
/** After the gateway's close frame, the upstream's has this long to come back before the socket is cut (as ws waits). */
const CLOSE_TIMEOUT_MS = 30_000;
/** Connect errors after which nothing reached the upstream: another host may be tried. */
const NOT_CONNECTED = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH']);
const UNSENT = new Set([...NOT_CONNECTED, 'ECONNRESET']);

/**
 * Every plain-TCP upstream leg of a worker reads into this one buffer (net's `onread`): no buffer is
 * allocated per read and no stream machinery runs between the read and the frame reader. Nothing may
 * keep a view of it once the read's callback returns: the frame reader copies what it keeps across
 * reads (a split header or payload, fragments), the relay sends a read's messages to the client in
 * onReadEnd (relay.ts) and copies those that come before the client's socket is open, and the
 * handshake copies a head cut over reads.
 */
const READ_BUFFER = Buffer.allocUnsafeSlow(64 * 1024);
/** READ_BUFFER.buffer, read once: the getter is a call into V8's C++ (about 100 instructions a read under callgrind). */
const READ_MEMORY = READ_BUFFER.buffer;
/**
 * The frames a connection sends in one event-loop turn are encoded into one buffer of OUT_BYTES (a
 * larger one for what does not fit). A buffer the kernel took whole goes back to the worker's spares
 * for the next connection that sends: an idle connection holds none, and the buffers in use are about
 * as many as the connections sending in one turn. A write left pending keeps its buffer until sent.
 */
const OUT_BYTES = 16 * 1024;
const SPARES_MAX = 64;
const spareOut: FrameBuffer[] = [];
const NO_BYTES = Buffer.alloc(0);
const NO_FRAMES = new FrameBuffer(NO_BYTES);

/**
 * The connections with frames encoded this event-loop turn, in the order they first queued one: one
 * setImmediate writes them all (flushAll) rather than one Immediate per connection. callgrind under
 * bench:instructions' gateway-ws: see the commit message.
 */
let toFlush: UpstreamSocket[] = [];
let flushAllScheduled = false;

function flushAll(): void {
  flushAllScheduled = false;
  const sockets = toFlush;
  toFlush = [];
  for (let i = 0; i < sockets.length; i++) sockets[i]!.flush();
}

export interface UpstreamSocketOptions {
  /** `http://host:port` or `https://host:port`: the upstream's origin. */
  origin: string;
  /** Path and query, as they go upstream. */
  target: string;
  /** End-to-end request headers, flat [name, value, ...] (Host and hop-by-hop ones are dropped). */
  headers: readonly string[];
  /** Subprotocols offered, in order. */
  protocols: readonly string[];
  maxPayload: number;
  /** Connecting: TCP, and TLS for a wss:// upstream. */
  connectTimeoutMs: number;
  /** From connected (the request sent) to the 101 (or the refusal's head). */
  handshakeTimeoutMs: number;
  maxResponseHeaderBytes: number;
  tls?: UpstreamTlsOptions | undefined;
  /** How long the upstream has to close the connection after the close handshake (default CLOSE_TIMEOUT_MS). */
  closeTimeoutMs?: number;
}

/**
 * Why a handshake failed: no answer in time, nothing reached the upstream (another host may take it),
 * connecting took longer than connectTimeoutMs (nothing reached it either), the TLS handshake with a
 * wss:// upstream failed (the error is passed on), or an answer that was not valid.
 */
export type HandshakeFailure = 'timeout' | 'unsent' | 'connectTimeout' | 'tls' | 'invalid';

/** What happens to a handshake; exactly one of these is called. */
export interface HandshakeHandler {
  /** 101: the connection is open. `headers` are the 101's, flat [name, value, ...], names in lower case. */
  onOpen(socket: UpstreamSocket, headers: string[]): void;
  /** Another final answer: its end-to-end headers (names lower-cased) and body; null when it could not be read or was over `maxBody` bytes. */
  onRefused(status: number, headers: string[], body: Buffer | null): void;
  /** `cause`: Node's error, for 'tls'. */
  onFailed(kind: HandshakeFailure, detail: string, cause?: unknown): void;
}

/** Where an open connection's traffic goes (set with attach()). */
export interface UpstreamMessageHandler {
  /** A message; `data` is a view of the read and valid until onReadEnd returns. */
  onMessage(data: Uint8Array, isBinary: boolean): void;
  /** Every message of the current read was delivered. */
  onReadEnd(): void;
  /** A ping or a pong: the upstream is alive (the idle rule counts it). */
  onControlFrame(): void;
  /**
   * The connection is over as far as messages go, reported once: the upstream's close frame (`code`
   * 1005 when it had none), or the connection lost (1006). `violation` is the close code the gateway
   * sent because the upstream broke the protocol (1002, 1007, 1009), else 0.
   */
  onClosed(code: number, reason: string, violation: number): void;
}

const enum State {
  Handshake,
  Refusal,
  Open,
  /** The gateway sent its close frame and waits for the upstream's. */
  Closing,
  Closed,
}

/** Answers to refused upgrades are passed on up to this size; a larger one reads as unreadable. */
export const MAX_REFUSAL_BODY = 1024 * 1024;

export class UpstreamSocket implements FrameSink {
  /** The subprotocol the upstream chose ('' for none). */
  protocol = '';
  private state = State.Handshake;
  private readonly socket: net.Socket;
  private readonly reader: FrameReader;
  private readonly expectedAccept: string;
  private readonly offered: readonly string[];
  private handler: UpstreamMessageHandler | null = null;
  private handshake: HandshakeHandler | null;
  private timer: NodeJS.Timeout | null = null;
  private head: Buffer | null = null;
  private refusal: ResponseParser | null = null;
  private refusalSink: RefusalSink | null = null;
  private paused = false;
  /** Frames encoded this event-loop turn, written at its end in one write (see send): out[0, outLength). */
  private out: FrameBuffer = NO_FRAMES;
  private outLength = 0;
  private flushScheduled = false;
  private closeSent = false;
  private reported = false;
  /** A wss:// upstream's TLS handshake has not completed. */
  private tlsPending = false;
  private readonly maxHeadBytes: number;
  private readonly maxPayload: number;
  private readonly handshakeTimeoutMs: number;
  private readonly closeTimeoutMs: number;

  /** Throws (before connecting) when the request cannot be written as asked: a header or subprotocol that is not valid. */
  constructor(options: UpstreamSocketOptions, handshake: HandshakeHandler) {
    const { secure, host, port, authority } = originOf(options.origin);
    if (options.protocols.length > 0) {
      const seen = new Set<string>();
      for (const protocol of options.protocols) {
        if (!isToken(protocol) || seen.has(protocol)) throw new Error(`the subprotocol "${protocol}" is not a token or is offered twice`);
        seen.add(protocol);
      }
    }
    const key = handshakeKey();
    this.expectedAccept = acceptFor(key);
    this.offered = options.protocols;
    let head = serializeHead('GET', options.target, ` HTTP/1.1\r\nhost: ${authority}`, options.headers, -2);
    if (head === null) throw new Error('a header holds a character that cannot be sent');
    for (let i = 1; i < options.headers.length; i += 2) {
      if (!isFieldValue(options.headers[i]!)) throw new Error(`the header ${options.headers[i - 1]} holds a character that cannot be sent`);
    }
    head = head.slice(0, -2) + `upgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-key: ${key}\r\nsec-websocket-version: 13\r\n`;
    if (options.protocols.length > 0) head += `sec-websocket-protocol: ${options.protocols.join(', ')}\r\n`;
    head += '\r\n';

    this.handshake = handshake;
    this.maxHeadBytes = options.maxResponseHeaderBytes;
    this.maxPayload = options.maxPayload;
    this.handshakeTimeoutMs = options.handshakeTimeoutMs;
    this.closeTimeoutMs = options.closeTimeoutMs ?? CLOSE_TIMEOUT_MS;
    this.reader = new FrameReader(this, options.maxPayload);
    if (secure) {
      this.tlsPending = true;
      this.socket = tls.connect(tlsConnectOptions(host, port, options.tls ?? {}), () => {
        this.tlsPending = false;
        this.onConnected();
      });
      this.socket.on('data', this.onData);
    } else {
      // allowHalfOpen .. decodeStrings: the values net.Socket's constructor sets on its copy of the
      // options anyway. Added there, each property changes the copy's shape and every property
      // read on it afterwards (net, Duplex, ReadableState, WritableState: about 30) missed V8's
      // caches on every connection (--log-ic); present from the start, none does. callgrind: see
      // the commit message.
      this.socket = net.connect({
        host,
        port,
        onread: { buffer: READ_BUFFER, callback: this.onRead },
        allowHalfOpen: false,
        emitClose: false,
        autoDestroy: true,
        decodeStrings: false,
      } as net.NetConnectOpts);
      this.socket.once('connect', this.onConnected);
    }
    this.socket.setNoDelay(true);
    this.socket.on('error', this.onError);
    this.socket.on('close', this.onSocketClose);
    this.socket.write(head);
    this.timer = setTimeout(this.onConnectTimeout, options.connectTimeoutMs);
  }

  /** Messages flow: the handshake's onOpen calls this before it returns. */
  attach(handler: UpstreamMessageHandler): void {
    this.handler = handler;
  }

  get isOpen(): boolean {
    return this.state === State.Open;
  }

  get isPaused(): boolean {
    return this.paused;
  }

  /** Bytes sent but not yet taken by the kernel. */
  get bufferedAmount(): number {
    return this.socket.writableLength + this.outLength;
  }

  send(data: Uint8Array, isBinary: boolean): void {
    if (this.state !== State.Open) return;
    this.queue(isBinary ? OPCODE_BINARY : OPCODE_TEXT, data);
  }

  /**
   * Encodes a frame after the others of this event-loop turn; they go out in one write at its end.
   * uWS calls the message handler once per message, each a callback of its own, so a nextTick would
   * write after every one; under bench:ws (4 messages in flight per connection) a turn's writes made
   * about 5 messages per system call instead of 1. Encoding into one buffer rather than corking the
   * socket spares a stream write per message (docs/websocket.md has the figures).
   */
  private queue(opcode: number, payload: Uint8Array): void {
    const size = frameSize(payload.length);
    const length = this.outLength;
    let out = this.out;
    if (length + size > out.bytes.length) {
      if (length === 0 && size <= OUT_BYTES) out = spareOut.pop() ?? new FrameBuffer(Buffer.allocUnsafeSlow(OUT_BYTES));
      else {
        const grown = new FrameBuffer(Buffer.allocUnsafeSlow(Math.max(OUT_BYTES, length + size, 2 * out.bytes.length)));
        out.bytes.copy(grown.bytes, 0, 0, length);
        spare(out);
        out = grown;
      }
      this.out = out;
    }
    this.outLength = encodeFrameInto(out, length, opcode, payload);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      toFlush.push(this);
      if (!flushAllScheduled) {
        flushAllScheduled = true;
        setImmediate(flushAll);
      }
    }
  }

  /** Writes the frames encoded so far (flushAll at the turn's end; at once for a close frame). */
  flush(): void {
    this.flushScheduled = false;
    const length = this.outLength;
    if (length === 0) return;
    this.outLength = 0;
    const out = this.out;
    this.out = NO_FRAMES;
    if (this.socket.destroyed) return spare(out);
    this.socket.write(out.bytes.subarray(0, length));
    // A write the kernel did not take whole keeps its buffer until it is sent.
    if (this.socket.writableLength === 0) spare(out);
  }

  /** Stops reading the upstream (backpressure from a slow client). */
  pause(): void {
    if (this.paused) return;
    this.paused = true;
    this.socket.pause();
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.socket.resume();
  }

  /** Sends a close frame; the socket ends when the upstream's comes back (or after CLOSE_TIMEOUT_MS). */
  close(code: number, reason: string): void {
    if (this.state !== State.Open) return;
    this.state = State.Closing;
    this.resume();
    this.sendClose(code, reason);
    this.timer = setTimeout(this.onCloseTimeout, this.closeTimeoutMs);
    this.timer.unref();
  }

  /** Cuts the connection at once. */
  terminate(): void {
    this.handshake = null;
    this.state = State.Closed;
    this.clearTimer();
    this.socket.destroy();
  }

  // ---- FrameSink ------------------------------------------------------------------------------------

  onMessage(data: Uint8Array, isBinary: boolean): void {
    if (this.state === State.Open) this.handler!.onMessage(data, isBinary);
  }

  /**
   * An upstream that pings without reading its socket would otherwise have a pong queued per ping for
   * as long as it goes on (the relay's own bound counts only the client's messages). Past maxPayload
   * unsent, pings go unanswered until the upstream reads again: RFC 6455 5.5.3 lets an endpoint answer
   * only the latest of several pings.
   */
  onPing(payload: Uint8Array): void {
    if (this.state !== State.Open) return;
    this.handler?.onControlFrame();
    if (this.bufferedAmount <= this.maxPayload) this.queue(OPCODE_PONG, payload);
  }

  /** The gateway sends no ping: a pong is the upstream's own heartbeat (RFC 6455 5.5.3). */
  onPong(): void {
    if (this.state === State.Open) this.handler?.onControlFrame();
  }

  onCloseFrame(code: number, reason: string): void {
    // The upstream's close: answered with the same code (none when it sent none), then the socket ends.
    if (!this.closeSent) this.sendClose(code === 1005 ? 0 : code, '');
    this.state = State.Closed;
    this.endSocket();
    this.report(code, reason, 0);
  }

  onViolation(code: number, detail: string): void {
    if (!this.closeSent) this.sendClose(code, '');
    this.state = State.Closed;
    this.endSocket();
    this.report(1006, detail, code);
  }

  // ---- socket -------------------------------------------------------------------------------------

  private sendClose(code: number, reason: string): void {
    this.closeSent = true;
    const payload = code === 0 ? NO_BYTES : closePayload(sendableCloseCode(code) ? code : 1011, reason);
    // Written now, after the turn's frames: the socket may be ended next.
    this.queue(OPCODE_CLOSE, payload);
    this.flush();
  }

  /** net's onread callback: `bytes` were read into READ_BUFFER. */
  private readonly onRead = (bytes: number): boolean => {
    if (this.state === State.Open || this.state === State.Closing) {
      // No subarray of the read: it would read READ_BUFFER.buffer through V8's C++ on every read.
      this.reader.push(READ_BUFFER, bytes, READ_MEMORY);
      this.handler?.onReadEnd();
    } else this.onData(READ_BUFFER.subarray(0, bytes));
    return true;
  };

  private readonly onData = (chunk: Buffer): void => {
    if (this.state === State.Open || this.state === State.Closing) {
      this.reader.push(chunk);
      this.handler?.onReadEnd();
      return;
    }
    if (this.state === State.Handshake) return this.readHead(chunk);
    if (this.state === State.Refusal) this.readRefusal(chunk, 0);
  };

  private readHead(chunk: Buffer): void {
    let bytes = this.head === null ? chunk : Buffer.concat([this.head, chunk]);
    for (;;) {
      const end = bytes.indexOf(CRLFCRLF);
      // Lines end in CRLF, as the upstream client reads any answer: one ending in a bare LF is refused
      // now (502), not waited on for a CRLFCRLF that never comes (it was a 504 after upstreamMs).
      const limit = end === -1 ? bytes.length : end;
      for (let lf = bytes.indexOf(0x0a); lf !== -1 && lf < limit; lf = bytes.indexOf(0x0a, lf + 1)) {
        if (lf === 0 || bytes[lf - 1] !== 0x0d) return this.fail('invalid', 'a line of the answer head ends in a bare LF, not CRLF');
      }
      if (end === -1) {
        if (bytes.length > this.maxHeadBytes) return this.fail('invalid', 'the answer head is larger than maxResponseHeaderBytes');
        // Kept across reads: a copy, since a view of the read buffer would be overwritten by the next read.
        this.head = Buffer.from(bytes);
        return;
      }
      if (end > this.maxHeadBytes) return this.fail('invalid', 'the answer head is larger than maxResponseHeaderBytes');
      const text = bytes.toString('latin1', 0, end);
      const lineEnd = text.indexOf('\r\n');
      const status = STATUS_LINE.exec(lineEnd === -1 ? text : text.slice(0, lineEnd));
      if (status === null) return this.fail('invalid', 'the status line is not valid');
      const code = Number(status[1]);
      if (code === 101) return this.upgraded(text, lineEnd, bytes.subarray(end + 4));
      if (code >= 200) return this.refused(bytes);
      // An interim answer (100, 103): the next head follows.
      bytes = bytes.subarray(end + 4);
      if (bytes.length === 0) {
        this.head = null;
        return;
      }
    }
  }

  /** `text`: the 101's head without its final CRLFCRLF (latin1); its header lines start after `lineEnd`. */
  private upgraded(text: string, lineEnd: number, rest: Buffer): void {
    // Every line checked at once (a token, a colon, a field value), then split without checks.
    if (lineEnd !== -1 && !HEADER_LINES.test(text.slice(lineEnd + 2))) return this.fail('invalid', 'a header line of the 101 is not valid');
    const headers: string[] = [];
    let upgrade = '';
    let connection = '';
    let accept: string | null = null;
    let protocol: string | null = null;
    let extensions = false;
    for (let at = lineEnd; at !== -1; ) {
      const start = at + 2;
      at = text.indexOf('\r\n', start);
      const colon = text.indexOf(':', start);
      const name = text.slice(start, colon).toLowerCase();
      const value = trimOws(text.slice(colon + 1, at === -1 ? text.length : at));
      headers.push(name, value);
      switch (name) {
        case 'upgrade':
          upgrade = value.toLowerCase();
          break;
        case 'connection':
          connection += `,${value.toLowerCase()}`;
          break;
        case 'sec-websocket-accept':
          if (accept !== null) return this.fail('invalid', 'more than one Sec-WebSocket-Accept');
          accept = value;
          break;
        case 'sec-websocket-protocol':
          if (protocol !== null) return this.fail('invalid', 'more than one Sec-WebSocket-Protocol');
          protocol = value;
          break;
        case 'sec-websocket-extensions':
          extensions = true;
          break;
      }
    }
    if (upgrade !== 'websocket') return this.fail('invalid', 'the 101 does not upgrade to websocket');
    if (!connection.split(',').some((token) => token.trim() === 'upgrade')) return this.fail('invalid', 'the 101 has no "Connection: Upgrade"');
    if (accept !== this.expectedAccept) return this.fail('invalid', 'Sec-WebSocket-Accept does not match the key');
    if (extensions) return this.fail('invalid', 'the upstream chose an extension none was offered for');
    if (protocol !== null && !this.offered.includes(protocol)) return this.fail('invalid', 'the upstream chose a subprotocol that was not offered');
    this.protocol = protocol ?? '';
    this.clearTimer();
    this.head = null;
    this.state = State.Open;
    const handshake = this.handshake!;
    this.handshake = null;
    handshake.onOpen(this, headers);
    if (rest.length > 0 && !this.reader.stopped) {
      this.reader.push(rest);
      this.handler?.onReadEnd();
    }
  }

  /** A final answer other than 101: read whole by the strict response parser, then the socket goes. */
  private refused(bytes: Buffer): void {
    this.state = State.Refusal;
    this.head = null;
    const sink = new RefusalSink();
    const parser = new ResponseParser(sink, this.maxHeadBytes);
    parser.start(false);
    this.refusal = parser;
    this.refusalSink = sink;
    this.readRefusal(bytes, 0);
  }

  private readRefusal(bytes: Buffer, offset: number): void {
    const parser = this.refusal!;
    const sink = this.refusalSink!;
    const at = parser.execute(bytes, offset, bytes.length);
    if (at === PARSE_FAILED || sink.tooLarge) return this.refusalDone(sink, false);
    if (parser.complete) this.refusalDone(sink, true);
  }

  private refusalDone(sink: RefusalSink, whole: boolean): void {
    const handshake = this.endHandshake();
    if (handshake === null) return;
    if (sink.status === 0) return handshake.onFailed('invalid', this.refusal!.error || 'the answer could not be read');
    handshake.onRefused(sink.status, sink.headers, whole ? Buffer.concat(sink.chunks, sink.length) : null);
  }

  private fail(kind: HandshakeFailure, detail: string, cause?: unknown): void {
    this.endHandshake()?.onFailed(kind, detail, cause);
  }

  /** The handshake is over without a connection: the socket goes; returns whom to tell (null: told already). */
  private endHandshake(): HandshakeHandler | null {
    const handshake = this.handshake;
    this.handshake = null;
    this.state = State.Closed;
    this.clearTimer();
    this.socket.destroy();
    return handshake;
  }

  /** Connected (TCP, and TLS for wss://): the request goes out now, and the answer has handshakeTimeoutMs. */
  private readonly onConnected = (): void => {
    if (this.state !== State.Handshake) return;
    this.clearTimer();
    this.timer = setTimeout(this.onTimeout, this.handshakeTimeoutMs);
  };

  private readonly onConnectTimeout = (): void => {
    this.timer = null;
    if (this.state === State.Handshake) this.fail('connectTimeout', 'connecting to the upstream timed out');
  };

  private readonly onTimeout = (): void => {
    this.timer = null;
    if (this.state === State.Handshake || this.state === State.Refusal) this.fail('timeout', 'the upstream did not answer the upgrade in time');
  };

  /**
   * Ends our side of the TCP connection. Should the upstream never close its side (RFC 6455 7.1.1 has
   * the server close first; a server that only answers the close frame keeps the socket, FIN-WAIT-2
   * here, for good), the socket is destroyed after CLOSE_TIMEOUT_MS.
   */
  private endSocket(): void {
    this.clearTimer();
    this.socket.end();
    this.timer = setTimeout(this.onCloseTimeout, this.closeTimeoutMs);
    this.timer.unref();
  }

  private readonly onCloseTimeout = (): void => {
    this.timer = null;
    this.socket.destroy();
  };

  private readonly onError = (err: Error & { code?: string }): void => {
    if (this.state !== State.Handshake) return;
    const code = err.code ?? '';
    // Connected, before 'secureConnect': nothing was read from the upstream, the error is the TLS handshake's.
    if (this.tlsPending && !NOT_CONNECTED.has(code)) return this.fail('tls', err.message, err);
    if (UNSENT.has(code)) return this.fail('unsent', err.message);
    this.fail('invalid', err.message);
    // Open or closing: 'close' follows and reports it.
  };

  private readonly onSocketClose = (): void => {
    this.clearTimer();
    if (this.state === State.Handshake) {
      // Part of a head came: the upstream answered, badly (502, not retried elsewhere as a connection that never got an answer is).
      if (this.head !== null) return this.fail('invalid', 'the upstream closed the connection in the middle of its answer');
      return this.fail('unsent', 'the upstream closed the connection without an answer');
    }
    if (this.state === State.Refusal) {
      const parser = this.refusal!;
      return this.refusalDone(this.refusalSink!, parser.complete || parser.endOfStream());
    }
    this.state = State.Closed;
    this.report(1006, '', 0);
  };

  private report(code: number, reason: string, violation: number): void {
    if (this.reported) return;
    this.reported = true;
    this.handler?.onClosed(code, reason, violation);
  }

  private clearTimer(): void {
    if (this.timer === null) return;
    clearTimeout(this.timer);
    this.timer = null;
  }
}

/** An upstream's origin as a connection needs it: `authority` is the Host header's value. */
interface Origin {
  secure: boolean;
  host: string;
  port: number;
  authority: string;
}

/** Origins parsed so far: they come from the configuration, so there are few. */
const origins = new Map<string, Origin>();
const MAX_ORIGINS = 1024;

/** The parts of `origin` (a URL parse per upgrade: about 3,900 instructions under callgrind). */
function originOf(origin: string): Origin {
  let parsed = origins.get(origin);
  if (parsed === undefined) {
    const url = new URL(origin);
    const secure = url.protocol === 'https:';
    parsed = {
      secure,
      host: url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname,
      port: url.port === '' ? (secure ? 443 : 80) : Number(url.port),
      authority: url.host,
    };
    if (origins.size >= MAX_ORIGINS) origins.clear();
    origins.set(origin, parsed);
  }
  return parsed;
}

/**
 * The Sec-WebSocket-Accept that answers `key` (RFC 6455 4.2.2), with Node's one-shot `hash` where this
 * Node has it (crypto.hash, 20.12 on): a Hash object per upgrade (createHash, update, digest) cost
 * about 8,200 instructions under callgrind.
 */
export function acceptFor(key: string, hash: typeof crypto.hash | undefined = crypto.hash): string {
  if (typeof hash === 'function') return hash('sha1', key + GUID, 'base64');
  return crypto.createHash('sha1').update(key + GUID).digest('base64');
}

/** A buffer no write holds any more: kept for the next connection that sends, if it has the usual size. */
function spare(out: FrameBuffer): void {
  if (out.bytes.length === OUT_BYTES && spareOut.length < SPARES_MAX) spareOut.push(out);
}

/** Collects a refused upgrade's answer: status, end-to-end headers, body up to MAX_REFUSAL_BODY. */
class RefusalSink implements ResponseSink {
  status = 0;
  headers: string[] = [];
  chunks: Buffer[] = [];
  length = 0;
  tooLarge = false;

  onResponseHead(head: ResponseHead): boolean {
    this.status = head.status;
    const views = head.headers;
    for (let i = 0; i < views.length; i += 2) this.headers.push(views[i]!.toString('latin1').toLowerCase(), views[i + 1]!.toString('latin1'));
    return true;
  }

  onResponseBody(chunk: Buffer): boolean {
    this.length += chunk.length;
    if (this.length > MAX_REFUSAL_BODY) {
      this.tooLarge = true;
      return false;
    }
    this.chunks.push(Buffer.from(chunk));
    return true;
  }

  onResponseEnd(): void {}
}

/** A field line's value without the spaces and tabs around it (RFC 9112 5.1: optional whitespace). */
function trimOws(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && (text.charCodeAt(start) === 0x20 || text.charCodeAt(start) === 0x09)) start++;
  while (end > start && (text.charCodeAt(end - 1) === 0x20 || text.charCodeAt(end - 1) === 0x09)) end--;
  return text.slice(start, end);
}
