/**
 * RFC 6455 framing for the upstream leg, where the gateway is the client: frames it sends are masked,
 * frames it receives must not be. No extensions are ever negotiated on this leg, so every RSV bit
 * must be clear.
 *
 * FrameReader takes the bytes of a connection in whatever pieces TCP delivers and hands out whole
 * messages (fragments reassembled) and control frames. A frame that arrives whole in one read is
 * delivered as a view of that read, without a copy; a frame split over reads is collected into a
 * buffer of its exact size once its header is known, so a large message costs one copy, not one per
 * read. The message size limit is checked against the header, before any payload is held.
 */
import { randomFillSync } from 'node:crypto';
import { isUtf8 } from 'node:buffer';

export const OPCODE_CONTINUATION = 0x0;
export const OPCODE_TEXT = 0x1;
export const OPCODE_BINARY = 0x2;
export const OPCODE_CLOSE = 0x8;
export const OPCODE_PING = 0x9;
export const OPCODE_PONG = 0xa;

/** Close codes for what the reader refuses (RFC 6455 7.4.1). */
export const PROTOCOL_ERROR = 1002;
export const INVALID_DATA = 1007;
export const MESSAGE_TOO_BIG = 1009;

/** Where a FrameReader delivers what it read: payloads are views of the bytes pushed, valid during the call. */
export interface FrameSink {
  onMessage(data: Uint8Array, isBinary: boolean): void;
  onPing(payload: Uint8Array): void;
  onPong(): void;
  /** A close frame: `code` 1005 when it carried none. Nothing after it is read. */
  onCloseFrame(code: number, reason: string): void;
  /** The peer broke the protocol: `code` is the close code that says how. Nothing after it is read. */
  onViolation(code: number, detail: string): void;
}

/** Codes a close frame may carry (RFC 6455 7.4): not 1004-1006, 1015, nor unassigned ones below 3000. */
export function sendableCloseCode(code: number): boolean {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999);
}

const enum Phase {
  Header,
  Payload,
  Stopped,
}

const EMPTY = Buffer.alloc(0);
/** The first buffer of a fragmented message; it doubles from there. */
const FIRST_FRAGMENT_BYTES = 4096;

export class FrameReader {
  private phase = Phase.Header;
  /** A header split over reads: its bytes so far (at most 14); allocated the first time one is. */
  private header: Buffer = EMPTY;
  private headerLength = 0;
  /** A payload split over reads: its buffer (exact size) and the bytes in it so far. */
  private payload: Buffer = EMPTY;
  private payloadFilled = 0;
  private frameFin = false;
  private frameOpcode = 0;
  /**
   * A fragmented message under way: its opcode (text or binary), and its bytes so far in one buffer
   * that grows by doubling (up to maxPayload). Not a list of fragments: RFC 6455 allows any number of
   * them, empty ones included, and a Buffer per fragment cost about 200 bytes each, so an upstream
   * sending empty continuations grew a worker by gigabytes without passing maxPayload.
   */
  private messageOpcode = 0;
  private fragments: Buffer = EMPTY;
  private fragmentBytes = 0;
  /**
   * Within the current push: the text frames that end before `utf8Until` were found UTF-8 together
   * (checkTextRun); a text frame ending before `scannedUntil` was looked at for a run already.
   */
  private utf8Until = 0;
  private scannedUntil = 0;
  /** The frame being delivered is one of those (message() skips its own check). */
  private utf8Checked = false;

  constructor(
    private readonly sink: FrameSink,
    private readonly maxPayload: number,
  ) {}

  /** Nothing more is read (after a close frame or a violation, or when the connection is given up). */
  stop(): void {
    this.phase = Phase.Stopped;
    this.payload = EMPTY;
    this.fragments = EMPTY;
  }

  get stopped(): boolean {
    return this.phase === Phase.Stopped;
  }

  /**
   * Reads data[0, end). `memory` is data.buffer, passed by a caller that read it once for all its
   * reads, else read here once per push when a frame is whole in it: Buffer's subarray reads it for
   * each view, a call into V8's C++ (callgrind: about 250 instructions each, a view per message).
   */
  push(data: Buffer, end = data.length, memory: ArrayBufferLike | null = null): void {
    let p = 0;
    this.utf8Until = this.scannedUntil = 0;
    while (p < end) {
      if (this.phase === Phase.Stopped) return;
      if (this.phase === Phase.Payload) {
        const take = Math.min(end - p, this.payload.length - this.payloadFilled);
        data.copy(this.payload, this.payloadFilled, p, p + take);
        this.payloadFilled += take;
        p += take;
        if (this.payloadFilled < this.payload.length) return;
        const payload = this.payload;
        this.payload = EMPTY;
        this.phase = Phase.Header;
        this.frame(payload);
        continue;
      }
      if (this.headerLength > 0) {
        // Complete a header split over reads, a byte at a time (it is at most 14 bytes).
        this.header[this.headerLength++] = data[p++]!;
        const needed = headerSize(this.header, this.headerLength);
        if (needed > this.headerLength) continue;
        const length = this.readHeader(this.header, 0);
        this.headerLength = 0;
        if (length < 0) return;
        this.startPayload(length);
        continue;
      }
      let needed = 2;
      let length = end - p >= 2 ? data[p + 1]! : 126;
      const b0 = data[p]!;
      // The usual frame: a whole text or binary message with a 7-bit length, outside a fragmented
      // one and within maxPayload. readHeader would take it as it is, and it is not inlined here (the
      // call and its checks cost about 130 instructions a message under callgrind).
      if (length < 126 && (b0 === 0x81 || b0 === 0x82) && this.messageOpcode === 0 && length <= this.maxPayload) {
        this.frameFin = true;
        this.frameOpcode = b0 & 0x0f;
      } else {
        needed = headerSize(data, end - p, p);
        if (needed > end - p) {
          if (this.header === EMPTY) this.header = Buffer.allocUnsafe(14);
          data.copy(this.header, 0, p, end);
          this.headerLength = end - p;
          return;
        }
        length = this.readHeader(data, p);
        if (length < 0) return;
      }
      const headerAt = p;
      p += needed;
      if (end - p >= length) {
        // The whole frame is in this read: a view of it, no copy.
        memory ??= data.buffer;
        const payload = new Uint8Array(memory, data.byteOffset + p, length);
        p += length;
        // A text frame with a 7-bit length, followed by another frame of the kind (first byte 0x81).
        if (needed === 2 && this.frameOpcode === OPCODE_TEXT && this.frameFin && end - p >= 2 && data[p] === 0x81 && p > this.scannedUntil) {
          this.checkTextRun(data, memory, headerAt, end);
        }
        this.utf8Checked = p <= this.utf8Until;
        this.frame(payload);
        this.utf8Checked = false;
      } else {
        this.startPayload(length);
      }
    }
  }

  /**
   * The text messages of one read, each in a frame of its own with a 7-bit length (first byte 0x81,
   * second below 126), checked for UTF-8 with one isUtf8 call from the first one's header to the last
   * one's end rather than one call per message: the call's fixed cost (about 410 instructions under
   * callgrind for a 64-byte message) was the reader's largest item. The headers' first bytes are made
   * ASCII (0x01) for the check and put back after it, so every byte between two payloads is ASCII:
   * ASCII never belongs to a multi-byte sequence, so the whole is UTF-8 exactly when each payload is.
   * When it is not, each message is checked on its own as before (the violation comes at the first bad
   * one, after those before it were delivered). A lone message is checked on its own. `at` is the
   * header of the frame being delivered, which is one of them.
   */
  private checkTextRun(data: Buffer, memory: ArrayBufferLike, at: number, end: number): void {
    let q = at;
    let frames = 0;
    while (end - q >= 2 && data[q] === 0x81) {
      const length = data[q + 1]!;
      if (length >= 126 || end - q - 2 < length) break;
      data[q] = 0x01;
      q += 2 + length;
      frames++;
    }
    this.scannedUntil = q;
    const valid = frames >= 2 && isUtf8(new Uint8Array(memory, data.byteOffset + at, q - at));
    for (let h = at; h < q; h += 2 + data[h + 1]!) data[h] = 0x81;
    if (valid) this.utf8Until = q;
  }

  private startPayload(length: number): void {
    if (length === 0) {
      this.frame(EMPTY);
      return;
    }
    this.payload = Buffer.allocUnsafe(length);
    this.payloadFilled = 0;
    this.phase = Phase.Payload;
  }

  /** Validates the header at `at` (whole); returns its payload length, or -1 after a violation. */
  private readHeader(bytes: Buffer, at: number): number {
    const b0 = bytes[at]!;
    const b1 = bytes[at + 1]!;
    const fin = (b0 & 0x80) !== 0;
    const opcode = b0 & 0x0f;
    if ((b0 & 0x70) !== 0) return this.violation(PROTOCOL_ERROR, 'a frame with an RSV bit set (no extension was negotiated)');
    if ((b1 & 0x80) !== 0) return this.violation(PROTOCOL_ERROR, 'a masked frame from the server');
    let length = b1 & 0x7f;
    if (length === 126) length = bytes.readUInt16BE(at + 2);
    else if (length === 127) {
      const high = bytes.readUInt32BE(at + 2);
      if (high >= 0x80000000) return this.violation(PROTOCOL_ERROR, 'a 64-bit frame length with its most significant bit set (RFC 6455 5.2)');
      // 2^53 and more cannot be a JavaScript number; far past any limit anyway.
      if (high > 0x1fffff) return this.violation(MESSAGE_TOO_BIG, 'a frame longer than 2^53 bytes');
      length = high * 0x100000000 + bytes.readUInt32BE(at + 6);
    }
    if (opcode >= 0x8) {
      if (opcode > OPCODE_PONG) return this.violation(PROTOCOL_ERROR, `unknown opcode ${opcode}`);
      if (!fin) return this.violation(PROTOCOL_ERROR, 'a fragmented control frame');
      if (length > 125) return this.violation(PROTOCOL_ERROR, 'a control frame longer than 125 bytes');
    } else if (opcode === OPCODE_CONTINUATION) {
      if (this.messageOpcode === 0) return this.violation(PROTOCOL_ERROR, 'a continuation frame without a message to continue');
      if (this.fragmentBytes + length > this.maxPayload) return this.violation(MESSAGE_TOO_BIG, 'a message larger than maxPayloadBytes');
    } else {
      if (opcode > OPCODE_BINARY) return this.violation(PROTOCOL_ERROR, `unknown opcode ${opcode}`);
      if (this.messageOpcode !== 0) return this.violation(PROTOCOL_ERROR, 'a new message before the fragmented one ended');
      if (length > this.maxPayload) return this.violation(MESSAGE_TOO_BIG, 'a message larger than maxPayloadBytes');
    }
    this.frameFin = fin;
    this.frameOpcode = opcode;
    return length;
  }

  private frame(payload: Uint8Array): void {
    const opcode = this.frameOpcode;
    if (opcode === OPCODE_TEXT || opcode === OPCODE_BINARY) {
      if (this.frameFin) return this.message(payload, opcode);
      this.messageOpcode = opcode;
      this.fragmentBytes = 0;
      this.appendFragment(payload);
      return;
    }
    if (opcode === OPCODE_CONTINUATION) {
      this.appendFragment(payload);
      if (!this.frameFin) return;
      const whole = this.fragments.subarray(0, this.fragmentBytes);
      const messageOpcode = this.messageOpcode;
      this.fragments = EMPTY;
      this.fragmentBytes = 0;
      this.messageOpcode = 0;
      return this.message(whole, messageOpcode);
    }
    if (opcode === OPCODE_PING) return this.sink.onPing(payload);
    if (opcode === OPCODE_PONG) return this.sink.onPong();
    // Close.
    if (payload.length === 1) return void this.violation(PROTOCOL_ERROR, 'a close frame with a one-byte payload');
    let code = 1005;
    let reason = '';
    if (payload.length >= 2) {
      code = (payload[0]! << 8) | payload[1]!;
      if (!sendableCloseCode(code)) return void this.violation(PROTOCOL_ERROR, `close code ${code} is not one a peer may send`);
      const text = Buffer.from(payload.buffer, payload.byteOffset + 2, payload.length - 2);
      if (!isUtf8(text)) return void this.violation(INVALID_DATA, 'a close reason that is not UTF-8');
      reason = text.toString();
    }
    this.stop();
    this.sink.onCloseFrame(code, reason);
  }

  /** Copies a fragment's payload (a view of a read, which the next read overwrites) into the message's buffer. */
  private appendFragment(payload: Uint8Array): void {
    const length = payload.length;
    if (length === 0) return;
    const needed = this.fragmentBytes + length;
    if (needed > this.fragments.length) {
      const grown = Buffer.allocUnsafe(Math.min(this.maxPayload, Math.max(needed, 2 * this.fragments.length, FIRST_FRAGMENT_BYTES)));
      this.fragments.copy(grown, 0, 0, this.fragmentBytes);
      this.fragments = grown;
    }
    this.fragments.set(payload, this.fragmentBytes);
    this.fragmentBytes = needed;
  }

  private message(data: Uint8Array, opcode: number): void {
    if (opcode === OPCODE_TEXT && !this.utf8Checked && !isUtf8(data)) return void this.violation(INVALID_DATA, 'a text message that is not UTF-8');
    this.sink.onMessage(data, opcode === OPCODE_BINARY);
  }

  private violation(code: number, detail: string): -1 {
    this.stop();
    this.sink.onViolation(code, detail);
    return -1;
  }
}

/** The size of the frame header starting at `at`, from the `available` bytes there (2 when unknown yet). */
function headerSize(bytes: Buffer, available: number, at = 0): number {
  if (available < 2) return 2;
  const length = bytes[at + 1]! & 0x7f;
  return length < 126 ? 2 : length === 126 ? 4 : 10;
}

// ---- writing (client to server: masked) -----------------------------------------------------------

/** Mask keys come from a pool of random bytes, refilled when used up (as ws does; RFC 6455 5.3 asks for unpredictable keys). */
const MASK_POOL_BYTES = 8 * 1024;
const maskPool = Buffer.allocUnsafeSlow(MASK_POOL_BYTES);
let maskAt = MASK_POOL_BYTES;

/** Where `n` unused random bytes start in maskPool (refilled when fewer are left); they count as used. */
function takeRandom(n: number): number {
  if (maskAt + n > MASK_POOL_BYTES) {
    randomFillSync(maskPool);
    maskAt = 0;
  }
  const at = maskAt;
  maskAt += n;
  return at;
}

/**
 * A handshake's Sec-WebSocket-Key: 16 random bytes from the same pool, base64 (randomBytes(16) per
 * upgrade was 2.3% of a worker's time opening connections under bench:ws).
 */
export function handshakeKey(): string {
  const at = takeRandom(16);
  return maskPool.toString('base64', at, at + 16);
}

/** The bytes of a masked frame with a payload of `length` bytes: header, mask key, payload. */
export function frameSize(length: number): number {
  return (length < 126 ? 2 : length < 0x10000 ? 4 : 10) + 4 + length;
}

/**
 * A buffer frames are encoded into, with a DataView of the same bytes, made once with the buffer:
 * the mask is applied four bytes at a time through it, at any alignment.
 */
export class FrameBuffer {
  readonly view: DataView;

  constructor(readonly bytes: Buffer) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  }
}

/** The mask pool's bytes, read four at a time. */
const maskView = new DataView(maskPool.buffer, maskPool.byteOffset, maskPool.length);

/** Writes one masked frame into `target` at `at` (frameSize(payload.length) bytes must be free there); returns where it ends. */
export function encodeFrameInto(target: FrameBuffer, at: number, opcode: number, payload: Uint8Array, fin = true): number {
  const bytes = target.bytes;
  const view = target.view;
  const length = payload.length;
  bytes[at] = (fin ? 0x80 : 0) | opcode;
  let keyAt = at + 2;
  if (length < 126) bytes[at + 1] = 0x80 | length;
  else if (length < 0x10000) {
    bytes[at + 1] = 0x80 | 126;
    view.setUint16(at + 2, length);
    keyAt = at + 4;
  } else {
    bytes[at + 1] = 0x80 | 127;
    view.setUint32(at + 2, Math.floor(length / 0x100000000));
    view.setUint32(at + 6, length >>> 0);
    keyAt = at + 10;
  }
  // The key as a little-endian word: byte i of the payload is XORed with byte i % 4 of the key, the
  // lowest byte of the word first, whatever the platform's byte order.
  const key = maskView.getInt32(takeRandom(4), true);
  view.setInt32(keyAt, key, true);
  const start = keyAt + 4;
  bytes.set(payload, start);
  if (length >= WORD_MASK_FROM) {
    maskInPlace(bytes, start, length, keyAt);
    return start + length;
  }
  let i = 0;
  const whole = length & ~3;
  for (; i < whole; i += 4) view.setInt32(start + i, view.getInt32(start + i, true) ^ key, true);
  // At most three bytes left: key bytes 0, 1, 2.
  for (; i < length; i++) bytes[start + i]! ^= key >> ((i & 3) * 8);
  return start + length;
}

/**
 * Payloads from this size on are masked four bytes at a time through an Int32Array over the
 * 4-byte-aligned middle; below it through the buffer's DataView. encodeFrameInto in a node loop, 3
 * runs each, the DataView against the Int32Array: 64 bytes 43-46 ns against 138-145 (the byte-by-byte
 * loop this replaced; callgrind: 1,949 instructions per 64-byte frame before), 256 bytes 219 against
 * 213-217, 16 KiB 11.6-12.7 µs against 9.6-9.7.
 */
const WORD_MASK_FROM = 256;

/** The mask key as the Int32Array reads it, in the platform's byte order. */
const keyBytes = new Uint8Array(4);
const keyWord = new Int32Array(keyBytes.buffer);

/** XORs target[start, start + length) with the mask key at target[keyAt] (byte i with key byte i % 4). */
function maskInPlace(target: Buffer, start: number, length: number, keyAt: number): void {
  const end = start + length;
  // Bytes before the first 4-byte boundary of the memory, then whole words, then the bytes after.
  const lead = -(target.byteOffset + start) & 3;
  for (let i = 0; i < lead; i++) target[start + i]! ^= target[keyAt + i]!;
  for (let k = 0; k < 4; k++) keyBytes[k] = target[keyAt + ((lead + k) & 3)]!;
  const key = keyWord[0]!;
  const first = start + lead;
  const words = (end - first) >> 2;
  const view = new Int32Array(target.buffer, target.byteOffset + first, words);
  for (let w = 0; w < words; w++) view[w]! ^= key;
  for (let p = first + words * 4; p < end; p++) target[p]! ^= target[keyAt + ((p - start) & 3)]!;
}

/** A close frame's payload: the code and a reason of at most 123 bytes of UTF-8. */
export function closePayload(code: number, reason: string): Buffer {
  const text = Buffer.from(reason);
  const payload = Buffer.allocUnsafe(2 + text.length);
  payload.writeUInt16BE(code, 0);
  text.copy(payload, 2);
  return payload;
}
