/**
 * The access log: one JSON line per request. Two parts: the line encoder here (fields to bytes, a
 * batch at a time) and the destination, an AppendWriter (./append-writer.ts): stdout or a file, the
 * file reopened on demand (SIGUSR1 in the primary, for log rotation).
 */
import type { ConnectionSummary } from '../exchange/listener.js';
import { AppendWriter, type Destination } from './append-writer.js';

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
  query?: string;
  userAgent?: string | undefined;
  consumer?: string | null;
  requestId?: string;
  traceId?: string;
  /** Sent upstream until the answer ended or the call failed; -1 (or absent): not forwarded. */
  upstreamMs?: number;
  /** Sent upstream until the response head; -1 (or absent): no head came. */
  upstreamHeaderMs?: number;
  cache?: string | null;
  /** The answer began and did not reach the client whole (the upstream or the client went away, a timeout, the shutdown grace). */
  cut?: boolean;
}

/**
 * The request fields of a line, in the order they are written, by their names in the line. Each may
 * be left out (`accessLog.omit`); level, time, pid, role, workerId, log and msg always are written.
 */
export const ACCESS_LOG_FIELDS = [
  'method',
  'path',
  'status',
  'endpoint',
  'upstream',
  'latencyMs',
  'bytesIn',
  'bytesOut',
  'client',
  'query',
  'userAgent',
  'consumer',
  'requestId',
  'traceId',
  'upstreamMs',
  'upstreamHeaderMs',
  'cache',
  // Written only when true: most lines are whole answers.
  'cut',
] as const;
export type AccessLogField = (typeof ACCESS_LOG_FIELDS)[number];

export interface AccessLog {
  /** Resolves once the destination can be written to. */
  readonly ready: Promise<void>;
  record(request: FinishedRequest): void;
  /** One line for a relayed WebSocket connection that ended (msg "websocket"; docs/websocket.md#observability). */
  recordConnection(request: FinishedRequest, connection: ConnectionSummary): void;
  /** Writes out what is buffered; call on shutdown. */
  flush(): Promise<void>;
  /** Opens a file destination again (after rotation); a no-op for stdout. */
  reopen(): Promise<void>;
  /** Lines dropped so far: refused while writing failed or too much waited, or lost with a failed write. */
  droppedLines(): number;
  /** Writing failed and has not worked since. */
  failing(): boolean;
}

export interface AccessLogOptions {
  workerId: number;
  /** File descriptor to write to; stdout by default. */
  fd?: number;
  /** A file to append to instead of `fd`. */
  path?: string;
  /** Fields left out of every line. */
  omit?: readonly string[];
  /** Longest a line may sit in the buffer. */
  flushIntervalMs?: number;
  /**
   * Told once when writing fails and lines start to be dropped (default: a process warning on
   * stderr). A file is retried by itself; stdout is given up.
   */
  onBroken?: (message: string) => void;
  /** Told once when writing works again after onBroken (default: a process warning on stderr). */
  onResumed?: (message: string) => void;
}

function warnBroken(message: string): void {
  process.emitWarning(message, 'AccessLogWarning');
}

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

const EMPTY = Buffer.alloc(0);
const HEAD_START = '{"level":30,"time":';
const LINE_END = fragment(',"msg":"request"}\n');
const CONNECTION_LINE_END = fragment(',"msg":"websocket"}\n');
/** An ASCII part of a line, encoded once. */
function fragment(text: string): Buffer {
  return Buffer.from(text, 'latin1');
}
const NULL = fragment('null');
const TRUE = fragment('true');
const key = (name: string): Buffer => fragment(`,"${name}":`);

/** Written before msg on a line whose strings were shortened to fit in one write to a pipe. */
const TRUNCATED = fragment(',"truncated":true');
/** No cut: every string written whole. */
const NO_CAP = Number.POSITIVE_INFINITY;
/** The most characters of each string a too-long line is written with, tried in turn until it fits. */
const CUT_CAPS = [1024, 256, 64, 0];
const keep = <T>(value: T): T => value;
/** What a line keeps of each string: all of it (NO_CAP), or its first `cap` characters. */
function clipTo(cap: number): (value: string | null) => string | null {
  return cap === NO_CAP ? keep : (value) => (value !== null && value.length > cap ? value.slice(0, cap) : value);
}

const DURATION_MS = key('durationMs');
const MESSAGES_IN = key('messagesIn');
const MESSAGES_OUT = key('messagesOut');
const CLOSE_CODE = key('closeCode');
const CLOSED_BY = key('closedBy');

/** Which fields a line has, and their keys encoded once. */
class Layout {
  readonly method: Buffer | null;
  readonly path: Buffer | null;
  readonly status: Buffer | null;
  readonly endpoint: Buffer | null;
  readonly upstream: Buffer | null;
  readonly latencyMs: Buffer | null;
  readonly bytesIn: Buffer | null;
  readonly bytesOut: Buffer | null;
  readonly client: Buffer | null;
  readonly query: Buffer | null;
  readonly userAgent: Buffer | null;
  readonly consumer: Buffer | null;
  readonly requestId: Buffer | null;
  readonly traceId: Buffer | null;
  readonly upstreamMs: Buffer | null;
  readonly upstreamHeaderMs: Buffer | null;
  readonly cache: Buffer | null;
  readonly cut: Buffer | null;

  constructor(omit: readonly string[]) {
    const on = (name: AccessLogField): Buffer | null => (omit.includes(name) ? null : key(name));
    this.method = on('method');
    this.path = on('path');
    this.status = on('status');
    this.endpoint = on('endpoint');
    this.upstream = on('upstream');
    this.latencyMs = on('latencyMs');
    this.bytesIn = on('bytesIn');
    this.bytesOut = on('bytesOut');
    this.client = on('client');
    this.query = on('query');
    this.userAgent = on('userAgent');
    this.consumer = on('consumer');
    this.requestId = on('requestId');
    this.traceId = on('traceId');
    this.upstreamMs = on('upstreamMs');
    this.upstreamHeaderMs = on('upstreamHeaderMs');
    this.cache = on('cache');
    this.cut = on('cut');
  }
}

/**
 * One JSON line per request, kept off the hot path. The line starts as pino's did (level, time, pid,
 * role, workerId, log), then the request fields of ACCESS_LOG_FIELDS in that order (those not omitted),
 * then msg. latencyMs, upstreamMs and upstreamHeaderMs are rounded to the microsecond, which performance.now()
 * differences carry no more than. record() only copies the fields into columns; lines are encoded a
 * batch at a time (every 64 requests, or by the flush timer) straight into a byte buffer: no object
 * walk, no strings built per line, and under load nothing held long enough for the GC to copy it.
 * Every character past ASCII is written as a \u escape.
 *
 * Encoded lines are handed to the writer in chunks of whole lines, at most its chunkLimit each (4 KiB
 * to a pipe shared by the cluster's processes, 256 KiB to a file); a chunk goes when full, or after at
 * most `flushIntervalMs`. Whatever is still buffered when the process exits is written synchronously.
 */
export function createAccessLog({ workerId, fd = 1, path, omit = [], flushIntervalMs = 250, onBroken = warnBroken, onResumed = warnBroken }: AccessLogOptions): AccessLog {
  const destination: Destination = path === undefined ? { fd } : { path };
  const encoder = new LineEncoder();
  /** Ranges of each buffer handed to the writer and not yet written. */
  const outstanding = new Map<Buffer, number>();
  /** Requests not even encoded: too much was waiting for the writer. */
  let refused = 0;
  /** Dropped lines when writing last failed. */
  let droppedBefore = 0;
  const writer = new AppendWriter(destination, {
    maxQueuedBytes: MAX_QUEUED_BYTES,
    onBroken(err) {
      droppedBefore = writer.droppedLines + refused;
      const then = path === undefined ? 'access logging stops' : 'lines are dropped until it works again (retried every few seconds)';
      onBroken(`access log: writing to ${path ?? `fd ${fd}`} failed (${err.code ?? err.message}); ${then}`);
    },
    onResumed() {
      onResumed(`access log: writing to ${path ?? `fd ${fd}`} works again; ${writer.droppedLines + refused - droppedBefore} lines dropped meanwhile`);
    },
    onReleased(buffer) {
      const left = (outstanding.get(buffer) ?? 1) - 1;
      if (left > 0) {
        outstanding.set(buffer, left);
        return;
      }
      outstanding.delete(buffer);
      // A buffer none of whose chunks is queued any more is reused for later lines.
      if (buffer !== encoder.buffer) encoder.release(buffer);
    },
  });
  // The fields after the time that every line of this process has.
  const base = fragment(`,"pid":${process.pid},"role":"worker","workerId":${workerId},"log":"access"`);
  const layout = new Layout(omit);

  /** Where the chunk being filled starts in encoder.buffer. */
  let chunkStart = 0;

  /** Hands encoder.buffer[chunkStart, end) to the writer. */
  const seal = (end: number): void => {
    if (end <= chunkStart) return;
    const buffer = encoder.buffer;
    if (writer.push(buffer, chunkStart, end)) outstanding.set(buffer, (outstanding.get(buffer) ?? 0) + 1);
    chunkStart = end;
  };
  // A line that outgrows its buffer moves to a fresh one: what came before it is handed over first.
  encoder.beforeMove = (lineStart) => {
    seal(lineStart);
    chunkStart = 0;
  };

  const batch = new Batch();
  // A line is ten copies of blocks kept encoded (keys, and the values that mostly repeat) between
  // the values written each time; see Segment.
  const l = layout;
  const keyOf = (key: Buffer | null): Buffer => key ?? EMPTY;
  // The time is kept apart (timeHead): a block with it would be made again every millisecond.
  const methodSegment = new Segment([Buffer.concat([base, keyOf(l.method)])], [l.method !== null], keyOf(l.path));
  const routeSegment = new Segment([keyOf(l.status), keyOf(l.endpoint), keyOf(l.upstream)], [l.status !== null, l.endpoint !== null, l.upstream !== null], keyOf(l.latencyMs));
  const clientSegment = new Segment([keyOf(l.client)], [l.client !== null], keyOf(l.query));
  const agentSegment = new Segment([keyOf(l.userAgent), keyOf(l.consumer)], [l.userAgent !== null, l.consumer !== null], keyOf(l.requestId));
  const cacheSegment = new Segment([keyOf(l.cache)], [l.cache !== null], LINE_END);
  // The same with `"cut":true` before msg: a line of its own block, so a whole answer's line costs nothing more.
  const cutSegment = new Segment([keyOf(l.cache)], [l.cache !== null], l.cut === null ? LINE_END : Buffer.concat([l.cut, TRUE, LINE_END]));
  // And both with `"truncated":true` (a line whose strings were shortened to fit a pipe's atomic write).
  const truncatedSegment = new Segment([keyOf(l.cache)], [l.cache !== null], Buffer.concat([TRUNCATED, LINE_END]));
  const cutTruncatedSegment = new Segment([keyOf(l.cache)], [l.cache !== null], l.cut === null ? Buffer.concat([TRUNCATED, LINE_END]) : Buffer.concat([l.cut, TRUE, TRUNCATED, LINE_END]));

  // `{"level":30,"time":<now>`, made once per millisecond.
  let headTime = -1;
  let timeHead: Buffer = EMPTY;

  /** Starts a line at `now` in the encoder (a fresh buffer when this one is nearly full). */
  function beginLine(now: number): void {
    const e = encoder;
    if (e.pos + LINE_ROOM > e.buffer.length) {
      // Room for the constant parts and short values; long strings make room as they go (ensure).
      seal(e.pos);
      e.renew(LINE_ROOM);
      chunkStart = 0;
    }
    e.lineStart = e.pos;
    if (now !== headTime) {
      headTime = now;
      timeHead = fragment(HEAD_START + now);
    }
    e.bytes(timeHead);
  }

  /** Ends the line begun last (its last bytes written), and the chunk when it is full. */
  function endLine(): void {
    const e = encoder;
    const lineStart = e.lineStart;
    // This line would make the chunk too long: the chunk ends before it.
    if (e.pos - chunkStart > writer.chunkLimit) seal(lineStart);
    if (e.pos - chunkStart >= writer.chunkLimit) seal(e.pos);
  }

  /** Where each request string of the batch starts in the encoder's scratch (STRINGS_PER_LINE a line), then where the last ends. */
  const stringStarts = new Int32Array(BATCH * STRINGS_PER_LINE + 1);

  /**
   * The request strings of the batch's first `n` lines (path, query, request ID, trace ID of each), put
   * into the encoder's scratch with one write, when none needs escaping; false otherwise (or when they
   * do not fit): the lines then write each one escaped.
   */
  function loadStrings(n: number): boolean {
    const starts = stringStarts;
    let text = '';
    let k = 0;
    for (let i = 0; i < n; i++) {
      starts[k++] = text.length;
      text += batch.path[i]!;
      starts[k++] = text.length;
      text += batch.query[i]!;
      starts[k++] = text.length;
      text += batch.requestId[i] ?? '';
      starts[k++] = text.length;
      text += batch.traceId[i] ?? '';
    }
    starts[k] = text.length;
    return needsNoEscape(text) && encoder.loadScratch(text);
  }

  /** Encodes the recorded fields into lines, then drops the references (short-lived: no GC promotion). */
  function encodeBatch(): void {
    const n = batch.size;
    if (n === 0) return;
    batch.size = 0;
    const e = encoder;
    const plain = loadStrings(n);
    for (let i = 0; i < n; i++) {
      encodeLine(i, plain, NO_CAP);
      // Longer than one write to a pipe may be (PIPE_BUF): written again with its strings shortened,
      // or the pipe, shared by the workers, could interleave another line into it.
      for (let c = 0; e.pos - e.lineStart > writer.chunkLimit && c < CUT_CAPS.length; c++) {
        e.pos = e.lineStart;
        encodeLine(i, false, CUT_CAPS[c]!);
      }
      endLine();
    }
    e.clearScratch();
    batch.clear(n);
  }

  /** Line `i` of the batch; `cap`: the most characters of each string written (NO_CAP: all, and no "truncated"). */
  function encodeLine(i: number, plain: boolean, cap: number): void {
    const e = encoder;
    const at = stringStarts;
    const clip = clipTo(cap);
    const k = i * STRINGS_PER_LINE;
    beginLine(batch.time[i]!);
    e.bytes(methodSegment.of(clip(batch.method[i]!), null, null));
    if (l.path !== null) {
      if (plain) e.quoted(at[k]!, at[k + 1]!);
      else e.string(clip(batch.path[i]!)!);
    }
    e.bytes(routeSegment.of(batch.status[i]!, clip(batch.endpoint[i]!), clip(batch.upstream[i]!)));
    if (l.latencyMs !== null) e.milliseconds(batch.latencyMs[i]!);
    if (l.bytesIn !== null) {
      e.bytes(l.bytesIn);
      e.number(batch.bytesIn[i]!);
    }
    if (l.bytesOut !== null) {
      e.bytes(l.bytesOut);
      e.number(batch.bytesOut[i]!);
    }
    e.bytes(clientSegment.of(batch.client[i]!, null, null));
    if (l.query !== null) {
      if (plain) e.quoted(at[k + 1]!, at[k + 2]!);
      else e.string(clip(batch.query[i]!)!);
    }
    e.bytes(agentSegment.of(clip(batch.userAgent[i]!), clip(batch.consumer[i]!), null));
    if (l.requestId !== null) {
      if (batch.requestId[i] === null) e.bytes(NULL);
      else if (plain) e.quoted(at[k + 2]!, at[k + 3]!);
      else e.string(clip(batch.requestId[i]!)!);
    }
    if (l.traceId !== null) {
      e.bytes(l.traceId);
      if (batch.traceId[i] === null) e.bytes(NULL);
      else if (plain) e.quoted(at[k + 3]!, at[k + 4]!);
      else e.string(batch.traceId[i]!);
    }
    if (l.upstreamMs !== null) {
      e.bytes(l.upstreamMs);
      const ms = batch.upstreamMs[i]!;
      if (ms < 0) e.bytes(NULL);
      else e.milliseconds(ms);
    }
    if (l.upstreamHeaderMs !== null) {
      e.bytes(l.upstreamHeaderMs);
      const ms = batch.upstreamHeaderMs[i]!;
      if (ms < 0) e.bytes(NULL);
      else e.milliseconds(ms);
    }
    const last = cap === NO_CAP ? (batch.cut[i] === 1 ? cutSegment : cacheSegment) : batch.cut[i] === 1 ? cutTruncatedSegment : truncatedSegment;
    e.bytes(last.of(batch.cache[i]!, null, null));
  }

  /** The line of a WebSocket connection that ended (see encodeLine for `cap`). */
  function encodeConnection(request: FinishedRequest, connection: ConnectionSummary, now: number, cap: number): void {
    const e = encoder;
    const clip = clipTo(cap);
    // A field of the line: its key and value, unless the key is null (a field left out).
    const field = (key: Buffer | null, value: Value): void => {
      if (key === null) return;
      e.bytes(key);
      e.value(typeof value === 'string' ? clip(value) : value);
    };
    beginLine(now);
    e.bytes(base);
    field(l.method, request.method);
    field(l.path, request.path);
    field(l.endpoint, request.routeTemplate);
    field(l.upstream, request.upstream);
    field(l.status, request.status);
    e.bytes(DURATION_MS);
    e.milliseconds(connection.durationMs);
    field(l.bytesIn, connection.bytesIn);
    field(l.bytesOut, connection.bytesOut);
    field(MESSAGES_IN, connection.messagesIn);
    field(MESSAGES_OUT, connection.messagesOut);
    field(CLOSE_CODE, connection.closeCode);
    field(CLOSED_BY, connection.closedBy);
    field(l.client, request.clientAddress);
    if (request.requestId) field(l.requestId, request.requestId);
    if (request.traceId) field(l.traceId, request.traceId);
    if (cap !== NO_CAP) e.bytes(TRUNCATED);
    e.bytes(CONNECTION_LINE_END);
  }

  const timer = setInterval(() => {
    encodeBatch();
    seal(encoder.pos);
  }, flushIntervalMs);
  timer.unref();

  process.once('exit', () => {
    encodeBatch();
    seal(encoder.pos);
    writer.writeOutSync();
  });

  return {
    ready: writer.ready,
    record(request) {
      const disabled = request.disabledListeners;
      if (disabled.length > 0 && disabled.includes(ACCESS_LOG_LISTENER)) return;
      if (writer.queuedBytes > MAX_QUEUED_BYTES) {
        refused++;
        return;
      }
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
      batch.query[i] = request.query ?? '';
      batch.userAgent[i] = request.userAgent ?? null;
      batch.consumer[i] = request.consumer ?? null;
      batch.requestId[i] = request.requestId || null;
      batch.traceId[i] = request.traceId || null;
      batch.upstreamMs[i] = request.upstreamMs ?? -1;
      batch.upstreamHeaderMs[i] = request.upstreamHeaderMs ?? -1;
      batch.cache[i] = request.cache ?? null;
      batch.cut[i] = request.cut === true ? 1 : 0;
      if (i === BATCH - 1) encodeBatch();
    },
    recordConnection(request, connection) {
      if (writer.queuedBytes > MAX_QUEUED_BYTES) {
        refused++;
        return;
      }
      // The requests recorded before it go first: lines stay in the order they ended.
      encodeBatch();
      const e = encoder;
      const now = Date.now();
      encodeConnection(request, connection, now, NO_CAP);
      for (let c = 0; e.pos - e.lineStart > writer.chunkLimit && c < CUT_CAPS.length; c++) {
        e.pos = e.lineStart;
        encodeConnection(request, connection, now, CUT_CAPS[c]!);
      }
      endLine();
    },
    flush() {
      encodeBatch();
      seal(encoder.pos);
      return writer.flush();
    },
    reopen() {
      // Lines encoded so far go to the file they were meant for before the writer moves on.
      encodeBatch();
      seal(encoder.pos);
      return writer.reopen();
    },
    droppedLines: () => writer.droppedLines + refused,
    failing: () => writer.failing,
  };
}

type Value = string | number | null;
/** The value of a slot whose field is left out of the line: never equal to a value, never written. */
const LEFT_OUT = Symbol('left out');

/**
 * Consecutive parts of a line that mostly stay the same from one line to the next: up to three values
 * (the method; status, endpoint and upstream; ...), each after its constant prefix (its key), then a
 * constant tail (the key of the field after them). Kept encoded as one block while the values are
 * those of the line before, so that a line is ten copies of blocks instead of eighteen: each copy
 * (TypedArray.prototype.set) costs about 25 ns on Node 20 here, whatever its length. The value of a
 * field left out of the line (`written` false) is neither compared nor written; its prefix is.
 */
class Segment {
  private a: Value | typeof LEFT_OUT = LEFT_OUT;
  private b: Value | typeof LEFT_OUT = LEFT_OUT;
  private c: Value | typeof LEFT_OUT = LEFT_OUT;
  private block: Buffer = EMPTY;
  private readonly writeA: boolean;
  private readonly writeB: boolean;
  private readonly writeC: boolean;

  constructor(
    private readonly prefixes: readonly Buffer[],
    written: readonly boolean[],
    private readonly tail: Buffer,
  ) {
    this.writeA = written[0] === true;
    this.writeB = written[1] === true;
    this.writeC = written[2] === true;
  }

  /** The block for these values (those of a slot the segment does not have are passed as null). */
  of(a: Value, b: Value, c: Value): Buffer {
    const ka = this.writeA ? a : LEFT_OUT;
    const kb = this.writeB ? b : LEFT_OUT;
    const kc = this.writeC ? c : LEFT_OUT;
    if (ka === this.a && kb === this.b && kc === this.c && this.block !== EMPTY) return this.block;
    this.a = ka;
    this.b = kb;
    this.c = kc;
    const parts: Buffer[] = [];
    const values: Array<Value | typeof LEFT_OUT> = [ka, kb, kc];
    for (let k = 0; k < this.prefixes.length; k++) {
      parts.push(this.prefixes[k]!);
      const value = values[k]!;
      if (value !== LEFT_OUT) parts.push(fragment(jsonValue(value)));
    }
    parts.push(this.tail);
    this.block = Buffer.concat(parts);
    return this.block;
  }
}

function jsonValue(value: Value): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'number') return Number.isFinite(value) ? '' + value : 'null';
  return jsonString(value);
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
  readonly query: string[] = new Array<string>(BATCH).fill('');
  readonly userAgent: Array<string | null> = new Array<string | null>(BATCH).fill(null);
  readonly consumer: Array<string | null> = new Array<string | null>(BATCH).fill(null);
  readonly requestId: Array<string | null> = new Array<string | null>(BATCH).fill(null);
  readonly traceId: Array<string | null> = new Array<string | null>(BATCH).fill(null);
  readonly upstreamMs = new Float64Array(BATCH);
  readonly upstreamHeaderMs = new Float64Array(BATCH);
  readonly cache: Array<string | null> = new Array<string | null>(BATCH).fill(null);
  readonly cut = new Uint8Array(BATCH);

  /** Lets the first `n` entries' strings go. */
  clear(n: number): void {
    for (let i = 0; i < n; i++) {
      this.method[i] = '';
      this.path[i] = '';
      this.endpoint[i] = null;
      this.upstream[i] = null;
      this.client[i] = '';
      this.query[i] = '';
      this.userAgent[i] = null;
      this.consumer[i] = null;
      this.requestId[i] = null;
      this.traceId[i] = null;
      this.cache[i] = null;
    }
  }
}

/** Strings of a line that the encoder's scratch holds: path, query, request ID, trace ID. */
const STRINGS_PER_LINE = 4;
/** Bytes after each line buffer for the request strings of a batch (a batch with more writes them escaped). */
const SCRATCH_BYTES = 64 * 1024;
/** Strings at most this long are copied from the scratch by hand; longer ones with copyWithin. */
const HAND_COPY = 12;

/** A line buffer of `size` bytes, with SCRATCH_BYTES after it in the same memory (see LineEncoder.quoted). */
function lineBuffer(size: number): Buffer {
  return Buffer.allocUnsafeSlow(size + SCRATCH_BYTES).subarray(0, size);
}

/** The line buffer and the scratch after it, as one view (copyWithin copies within one typed array). */
function withScratch(buffer: Buffer): Buffer {
  return Buffer.from(buffer.buffer, buffer.byteOffset, buffer.length + SCRATCH_BYTES);
}

/** The characters a JSON string writes escaped below 0x80: the controls, '"', '\\' and DEL (written \u007f here). */
const ESCAPED_ASCII = [...Array.from({ length: 0x20 }, (_, c) => String.fromCharCode(c)), '"', '\\', '\x7f'];

/**
 * Whether `text` holds only printable ASCII other than '"' and '\\': by its UTF-8 length (every
 * character past ASCII takes more than one byte), then a search (memchr) for each character that would
 * need escaping. About 3 instructions a character in all; a JavaScript loop over it costs about 25.
 */
function needsNoEscape(text: string): boolean {
  if (Buffer.byteLength(text, 'utf8') !== text.length) return false;
  for (let i = 0; i < ESCAPED_ASCII.length; i++) if (text.indexOf(ESCAPED_ASCII[i]!) !== -1) return false;
  return true;
}

/**
 * Writes one line at a time into a byte buffer. ASCII only: JSON strings with anything to escape go
 * through JSON.stringify, and characters past ASCII become \u escapes.
 *
 * The request strings of a batch (loadScratch) are written with one call into a scratch after the line
 * buffer, and each is copied from there into its line (quoted): from JavaScript a string costs about 40
 * instructions a character (charCodeAt, the checks, a byte array's store), from the scratch a copy
 * costs about 350 whatever its length. callgrind, record() of bench:proxy's request in a loop: about
 * 14,400 instructions a line before, 11,300 this way.
 */
class LineEncoder {
  buffer: Buffer = lineBuffer(BUFFER_SIZE);
  /** `buffer` and its scratch. */
  private whole: Buffer = withScratch(this.buffer);
  /** What the scratch holds for the batch being encoded; '' when none. */
  private scratchText = '';
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
    this.buffer = spare !== undefined && spare.length >= room ? spare : lineBuffer(Math.max(BUFFER_SIZE, room));
    this.whole = withScratch(this.buffer);
    this.pos = 0;
    this.lineStart = 0;
    // A batch that moves to a fresh buffer takes its strings along.
    if (this.scratchText !== '') this.whole.write(this.scratchText, this.buffer.length, 'latin1');
  }

  /** Puts a batch's request strings (printable ASCII) into the scratch; false when they do not fit. */
  loadScratch(text: string): boolean {
    if (text.length > SCRATCH_BYTES) return false;
    this.whole.write(text, this.buffer.length, 'latin1');
    this.scratchText = text;
    return true;
  }

  clearScratch(): void {
    this.scratchText = '';
  }

  /** The scratch's bytes [start, end) as a JSON string literal (loadScratch checked them). */
  quoted(start: number, end: number): void {
    const length = end - start;
    this.ensure(length + 2);
    const buffer = this.buffer;
    const p = this.pos;
    buffer[p] = 0x22;
    const from = buffer.length + start;
    if (length > HAND_COPY) {
      this.whole.copyWithin(p + 1, from, from + length);
    } else {
      const whole = this.whole;
      for (let i = 0; i < length; i++) buffer[p + 1 + i] = whole[from + i]!;
    }
    buffer[p + 1 + length] = 0x22;
    this.pos = p + length + 2;
  }

  /** `buffer` is written out and no longer referenced by any chunk. */
  release(buffer: Buffer): void {
    if (buffer.length === BUFFER_SIZE && this.spare.length < SPARE_BUFFERS) this.spare.push(buffer);
  }

  bytes(constant: Buffer): void {
    const n = constant.length;
    this.ensure(n);
    const buffer = this.buffer;
    const p = this.pos;
    // TypedArray.prototype.set costs about 25 ns whatever the length (Node 20); a copy by hand about 5 ns a byte.
    if (n <= 4) for (let i = 0; i < n; i++) buffer[p + i] = constant[i]!;
    else buffer.set(constant, p);
    this.pos = p + n;
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

  /** A string, a number or null. */
  value(value: Value): void {
    if (typeof value === 'string') this.string(value);
    else if (value === null) this.bytes(NULL);
    else this.number(value);
  }

  stringOrNull(value: string | null): void {
    if (value === null) this.bytes(NULL);
    else this.string(value);
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

function escapedJsonString(value: string): string {
  return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}
