import { fstatSync, write, writeSync } from 'node:fs';

/** The listener id used in /healthcheck and in an endpoint's `x-disabled-listeners`. */
export const ACCESS_LOG_LISTENER = 'accessLog';

/** The fields of a finished request the access log reads (a subset of the data plane's request info). */
export interface FinishedRequest {
  method: string;
  path: string;
  routeTemplate: string | null;
  upstream: string | null;
  status: number;
  latencyMs: number;
  bytesIn: number;
  bytesOut: number;
  clientAddress: string;
  disabledListeners: readonly string[];
}

export interface AccessLog {
  /** Resolves once the destination can be written to. */
  readonly ready: Promise<void>;
  record(request: FinishedRequest): void;
  /** Writes out what is buffered; call on shutdown. */
  flush(): Promise<void>;
}

export interface AccessLogOptions {
  workerId: number;
  /** File descriptor to write to; stdout by default. */
  fd?: number;
  /** Longest a line may sit in the buffer. */
  flushIntervalMs?: number;
}

/** Writes to a pipe or socket of at most PIPE_BUF bytes are atomic (Linux: 4096). */
const PIPE_CHUNK = 4096;
/** Regular files (and /dev/null, ttys): a write is never interleaved with other writers' writes. */
const FILE_CHUNK = 256 * 1024;
/** Lines are encoded into buffers of this size (a longer line gets a buffer of its own). */
const BUFFER_SIZE = 512 * 1024;
/** Written-out buffers kept for reuse. */
const SPARE_BUFFERS = 4;
/** Lines recorded before they are encoded (the flush timer encodes a partial batch). */
const BATCH = 64;
/** Latencies below this (about 12 days) take the integer path of LineEncoder.milliseconds. */
const MAX_FAST_MS = 0x40000000;
/** Bytes a line may take before its strings are measured: the constant parts and short values. */
const LINE_ROOM = 1024;
/** Beyond this much unwritten log (a stuck reader), new lines are dropped rather than held in memory. */
const MAX_QUEUED_BYTES = 32 * 1024 * 1024;
const EAGAIN_RETRY_MS = 10;

/** A part of a buffer that goes out in one write(). */
interface Chunk {
  buffer: Buffer;
  start: number;
  end: number;
}

const EMPTY = new Uint8Array(0);
const HEAD_START = '{"level":30,"time":';
const PATH_KEY = ',"path":';
const ENDPOINT_KEY = ',"endpoint":';
const UPSTREAM_KEY = ',"upstream":';
const LATENCY_KEY = ',"latencyMs":';
const CLIENT_KEY = ',"client":';
const LINE_END = ',"msg":"request"}\n';
/** An ASCII part of a line, encoded once. */
const fragment = (text: string): Uint8Array => Buffer.from(text, 'latin1');
const STATUS_KEY = ',"status":';
const NULL = fragment('null');
const BYTES_IN = fragment(',"bytesIn":');
const BYTES_OUT = fragment(',"bytesOut":');
const NO_BYTES_IN = fragment(',"bytesIn":0,"bytesOut":');

/**
 * One JSON line per request, kept off the hot path. Each line is the one pino wrote here before (same
 * keys, same order: level, time, pid, role, workerId, log, the request fields, msg; latencyMs is
 * rounded to the microsecond, which performance.now() differences carry no more than). record() only
 * copies the fields into columns; lines are encoded a batch at a time (every 64 requests, or by the
 * flush timer) straight into a byte buffer: no object walk, no strings built per line, and under load
 * nothing held long enough for the GC to copy it. Every character past ASCII is written as a \u escape.
 *
 * Lines are gathered into chunks written asynchronously, one write in flight at a time: at most
 * PIPE_BUF (4096) bytes when the destination is a pipe or socket (shared by every process of the
 * cluster, so writes must stay whole lines), 256 KiB otherwise. A chunk goes out when full, or after at
 * most `flushIntervalMs`. Whatever is still buffered when the process exits is written synchronously.
 */
export function createAccessLog({ workerId, fd = 1, flushIntervalMs = 250 }: AccessLogOptions): AccessLog {
  let chunkLimit = FILE_CHUNK;
  let ready: Promise<void>;
  try {
    const stat = fstatSync(fd);
    if (stat.isFIFO() || stat.isSocket()) chunkLimit = PIPE_CHUNK;
    ready = Promise.resolve();
  } catch (err) {
    ready = Promise.reject(err);
    // Unhandled only if nobody awaits it; the worker does.
    ready.catch(() => {});
  }
  const base = `,"pid":${process.pid},"role":"worker","workerId":${workerId},"log":"access","method":`;

  const encoder = new LineEncoder();
  /** Where the chunk being filled starts in encoder.buffer. */
  let chunkStart = 0;
  const queue: Chunk[] = [];
  let queuedBytes = 0;
  let writing: Chunk | null = null;
  let broken = false;
  let waiters: Array<() => void> = [];

  /** Queues encoder.buffer[chunkStart, end). */
  const seal = (end: number): void => {
    if (end <= chunkStart) return;
    queue.push({ buffer: encoder.buffer, start: chunkStart, end });
    chunkStart = end;
  };
  // A line that outgrows its buffer moves to a fresh one: what came before it is queued first.
  encoder.beforeMove = (lineStart) => {
    seal(lineStart);
    chunkStart = 0;
  };

  const settleWaiters = (): void => {
    if (writing !== null || queue.length > 0 || encoder.pos > chunkStart) return;
    const done = waiters;
    waiters = [];
    for (const resolve of done) resolve();
  };

  const fail = (err: NodeJS.ErrnoException): void => {
    // The destination is gone (EPIPE, EBADF, ENOSPC, ...): stop logging rather than pile lines up.
    broken = true;
    writing = null;
    queue.length = 0;
    queuedBytes = 0;
    chunkStart = encoder.pos;
    process.emitWarning(`access log: writing to fd ${fd} failed (${err.code ?? err.message}); access logging stops`, 'AccessLogWarning');
    settleWaiters();
  };

  const writeChunk = (chunk: Chunk): void => {
    if (broken) return;
    writing = chunk;
    write(fd, chunk.buffer, chunk.start, chunk.end - chunk.start, null, onWritten);
  };

  const onWritten = (err: NodeJS.ErrnoException | null, written: number): void => {
    const chunk = writing!;
    if (err) {
      if (err.code === 'EAGAIN') {
        setTimeout(writeChunk, EAGAIN_RETRY_MS, chunk);
        return;
      }
      fail(err);
      return;
    }
    queuedBytes -= written;
    chunk.start += written;
    if (chunk.start < chunk.end) {
      writeChunk(chunk);
      return;
    }
    writing = null;
    // A buffer none of whose chunks is queued any more is reused for later lines.
    if (chunk.buffer !== encoder.buffer && (queue.length === 0 || queue[0]!.buffer !== chunk.buffer)) encoder.release(chunk.buffer);
    kick();
  };

  const kick = (): void => {
    if (writing !== null || broken) return;
    const next = queue.shift();
    if (next === undefined) {
      settleWaiters();
      return;
    }
    writeChunk(next);
  };

  const batch = new Batch();

  /** Encodes the recorded fields into lines, then drops the references (short-lived: no GC promotion). */
  // Parts of a line that repeat from one line to the next are kept encoded: the head (per millisecond),
  // the method, the endpoint + upstream pair, and the client. Each is checked against the last value.
  let headTime = -1;
  let head: Uint8Array = EMPTY;
  let lastMethod = '';
  let methodPart: Uint8Array = EMPTY;
  let lastStatus = -1;
  let lastEndpoint: string | null = null;
  let lastUpstream: string | null = null;
  let routePart: Uint8Array = EMPTY;
  let lastClient = '';
  let clientPart: Uint8Array = EMPTY;

  function encodeBatch(): void {
    const n = batch.size;
    if (n === 0) return;
    batch.size = 0;
    const e = encoder;
    for (let i = 0; i < n; i++) {
      const now = batch.time[i]!;
      if (now !== headTime) {
        headTime = now;
        head = fragment(`${HEAD_START}${now}${base}`);
      }
      const method = batch.method[i]!;
      if (method !== lastMethod || methodPart === EMPTY) {
        lastMethod = method;
        methodPart = fragment(`${jsonString(method)}${PATH_KEY}`);
      }
      const status = batch.status[i]!;
      const endpoint = batch.endpoint[i]!;
      const upstream = batch.upstream[i]!;
      if (status !== lastStatus || endpoint !== lastEndpoint || upstream !== lastUpstream || routePart === EMPTY) {
        lastStatus = status;
        lastEndpoint = endpoint;
        lastUpstream = upstream;
        routePart = fragment(
          `${STATUS_KEY}${jsonNumber(status)}${ENDPOINT_KEY}${jsonStringOrNull(endpoint)}${UPSTREAM_KEY}${jsonStringOrNull(upstream)}${LATENCY_KEY}`,
        );
      }
      const client = batch.client[i]!;
      if (client !== lastClient || clientPart === EMPTY) {
        lastClient = client;
        clientPart = fragment(`${CLIENT_KEY}${jsonString(client)}${LINE_END}`);
      }
      if (e.pos + LINE_ROOM > e.buffer.length) {
        // Room for the constant parts and short values; long strings make room as they go (ensure).
        seal(e.pos);
        e.renew(LINE_ROOM);
        chunkStart = 0;
      }
      e.lineStart = e.pos;
      e.bytes(head);
      e.bytes(methodPart);
      e.string(batch.path[i]!);
      e.bytes(routePart);
      e.milliseconds(batch.latencyMs[i]!);
      const bytesIn = batch.bytesIn[i]!;
      if (bytesIn === 0) {
        e.bytes(NO_BYTES_IN);
      } else {
        e.bytes(BYTES_IN);
        e.number(bytesIn);
        e.bytes(BYTES_OUT);
      }
      e.number(batch.bytesOut[i]!);
      e.bytes(clientPart);
      const lineStart = e.lineStart;
      queuedBytes += e.pos - lineStart;
      // This line would make the chunk too long: the chunk ends before it.
      if (e.pos - chunkStart > chunkLimit) seal(lineStart);
      if (e.pos - chunkStart >= chunkLimit) seal(e.pos);
    }
    batch.clear(n);
    if (queue.length > 0) kick();
  }

  const timer = setInterval(() => {
    encodeBatch();
    if (encoder.pos === chunkStart) return;
    seal(encoder.pos);
    kick();
  }, flushIntervalMs);
  timer.unref();

  process.once('exit', () => {
    // Synchronously, what has not been handed to a write yet (the write in flight may or may not land).
    encodeBatch();
    seal(encoder.pos);
    for (const chunk of queue) {
      for (let attempts = 0; chunk.start < chunk.end && attempts < 1000; attempts++) {
        try {
          chunk.start += writeSync(fd, chunk.buffer, chunk.start, chunk.end - chunk.start);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') return;
        }
      }
    }
  });

  return {
    ready,
    record(request) {
      if (broken) return;
      const disabled = request.disabledListeners;
      if (disabled.length > 0 && disabled.includes(ACCESS_LOG_LISTENER)) return;
      if (queuedBytes > MAX_QUEUED_BYTES) return;
      // Only the fields are kept here; lines are encoded a batch at a time (encodeBatch).
      const i = batch.size++;
      batch.time[i] = Date.now();
      batch.method[i] = request.method;
      batch.path[i] = request.path;
      batch.status[i] = request.status;
      batch.endpoint[i] = request.routeTemplate;
      batch.upstream[i] = request.upstream;
      batch.latencyMs[i] = request.latencyMs;
      batch.bytesIn[i] = request.bytesIn;
      batch.bytesOut[i] = request.bytesOut;
      batch.client[i] = request.clientAddress;
      if (i === BATCH - 1) encodeBatch();
    },
    flush() {
      encodeBatch();
      seal(encoder.pos);
      kick();
      if (writing === null && queue.length === 0) return Promise.resolve();
      return new Promise((resolve) => waiters.push(resolve));
    },
  };
}

/** Lines recorded and not yet encoded, one column per field. */
class Batch {
  size = 0;
  readonly time = new Float64Array(BATCH);
  readonly method: string[] = new Array<string>(BATCH).fill('');
  readonly path: string[] = new Array<string>(BATCH).fill('');
  readonly status = new Float64Array(BATCH);
  readonly endpoint: Array<string | null> = new Array<string | null>(BATCH).fill(null);
  readonly upstream: Array<string | null> = new Array<string | null>(BATCH).fill(null);
  readonly latencyMs = new Float64Array(BATCH);
  readonly bytesIn = new Float64Array(BATCH);
  readonly bytesOut = new Float64Array(BATCH);
  readonly client: string[] = new Array<string>(BATCH).fill('');

  /** Lets the first `n` entries' strings go. */
  clear(n: number): void {
    for (let i = 0; i < n; i++) {
      this.method[i] = '';
      this.path[i] = '';
      this.endpoint[i] = null;
      this.upstream[i] = null;
      this.client[i] = '';
    }
  }
}

/**
 * Writes one line at a time into a byte buffer. ASCII only: JSON strings with anything to escape go
 * through JSON.stringify, and characters past ASCII become \u escapes.
 */
class LineEncoder {
  buffer: Buffer = Buffer.allocUnsafeSlow(BUFFER_SIZE);
  pos = 0;
  /** Start of the line being written (0 after the line moved to a fresh buffer). */
  lineStart = 0;
  /** Called with the line's start in the old buffer before a line moves to a fresh one. */
  beforeMove: (lineStart: number) => void = () => {};

  /** Buffers whose lines are all written, kept for reuse (allocating fresh ones costs page faults). */
  private readonly spare: Buffer[] = [];

  /** Starts a fresh buffer of at least `room` bytes. */
  renew(room: number): void {
    const spare = this.spare.pop();
    this.buffer = spare !== undefined && spare.length >= room ? spare : Buffer.allocUnsafeSlow(Math.max(BUFFER_SIZE, room));
    this.pos = 0;
    this.lineStart = 0;
  }

  /** `buffer` is written out and no longer referenced by any chunk. */
  release(buffer: Buffer): void {
    if (buffer.length === BUFFER_SIZE && this.spare.length < SPARE_BUFFERS) this.spare.push(buffer);
  }

  bytes(constant: Uint8Array): void {
    this.ensure(constant.length);
    this.buffer.set(constant, this.pos);
    this.pos += constant.length;
  }

  /** ASCII text known to need no escaping (digits). */
  raw(text: string): void {
    this.ensure(text.length);
    const buffer = this.buffer;
    let p = this.pos;
    for (let i = 0; i < text.length; i++) buffer[p++] = text.charCodeAt(i);
    this.pos = p;
  }

  number(value: number): void {
    if (!Number.isFinite(value)) {
      this.bytes(NULL);
    } else if (value >= 0 && value < 0x40000000 && (value | 0) === value) {
      this.digits(value);
    } else {
      this.raw('' + value);
    }
  }

  /**
   * Milliseconds to the microsecond, written like JSON writes the rounded number ("0.948", "12.05",
   * "3"): formatting a double's every digit costs more than the rest of the line.
   */
  milliseconds(value: number): void {
    if (!(value >= 0) || value >= MAX_FAST_MS) {
      this.number(Number.isFinite(value) ? Math.round(value * 1000) / 1000 : value);
      return;
    }
    const micros = Math.round(value * 1000);
    const whole = Math.floor(micros / 1000);
    let fraction = micros - whole * 1000;
    this.digits(whole);
    if (fraction === 0) return;
    this.ensure(4);
    const buffer = this.buffer;
    let p = this.pos;
    buffer[p++] = 0x2e;
    buffer[p++] = 0x30 + ((fraction / 100) | 0);
    fraction %= 100;
    if (fraction !== 0) {
      buffer[p++] = 0x30 + ((fraction / 10) | 0);
      fraction %= 10;
      if (fraction !== 0) buffer[p++] = 0x30 + fraction;
    }
    this.pos = p;
  }

  /** A JSON string literal. */
  string(value: string): void {
    const length = value.length;
    this.ensure(length + 2);
    const buffer = this.buffer;
    const start = this.pos;
    let p = start;
    buffer[p++] = 0x22;
    for (let i = 0; i < length; i++) {
      const c = value.charCodeAt(i);
      if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) {
        this.pos = start;
        this.raw(escapedJsonString(value));
        return;
      }
      buffer[p++] = c;
    }
    buffer[p++] = 0x22;
    this.pos = p;
  }

  digits(value: number): void {
    this.ensure(10);
    let length = 1;
    for (let v = value; v >= 10; v = (v / 10) | 0) length++;
    const buffer = this.buffer;
    let p = this.pos + length;
    this.pos = p;
    for (let v = value; length > 0; length--, v = (v / 10) | 0) buffer[--p] = 0x30 + (v % 10);
  }

  /** Makes room for `n` more bytes, moving the line so far to a fresh buffer if needed. */
  private ensure(n: number): void {
    if (this.pos + n <= this.buffer.length) return;
    const lineSoFar = this.buffer.subarray(this.lineStart, this.pos);
    this.beforeMove(this.lineStart);
    this.renew(lineSoFar.length + n + LINE_ROOM);
    this.buffer.set(lineSoFar, 0);
    this.pos = lineSoFar.length;
  }
}

/** A JSON string literal holding only ASCII (what needs escaping is rare: one scan decides). */
export function jsonString(value: string): string {
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || c > 0x7e) return escapedJsonString(value);
  }
  return '"' + value + '"';
}

function jsonNumber(value: number): string {
  return Number.isFinite(value) ? '' + value : 'null';
}

function jsonStringOrNull(value: string | null): string {
  return value === null ? 'null' : jsonString(value);
}

function escapedJsonString(value: string): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}
