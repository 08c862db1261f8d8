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
const FILE_CHUNK = 64 * 1024;
/** Beyond this much unwritten log (a stuck reader), new lines are dropped rather than held in memory. */
const MAX_QUEUED_BYTES = 32 * 1024 * 1024;
const EAGAIN_RETRY_MS = 10;

/**
 * One JSON line per request, kept off the hot path. Each line is the one pino wrote here before (same
 * keys, same order: level, time, pid, role, workerId, log, the request fields, msg), built by string
 * concatenation instead of walking an object. Every character past ASCII is written as a \u escape,
 * so a line's length is its byte length and chunks go out as latin1 without an encoding pass.
 *
 * Lines are gathered into chunks written asynchronously, one write in flight at a time: at most
 * PIPE_BUF (4096) bytes when the destination is a pipe or socket (shared by every process of the
 * cluster, so writes must stay whole lines), 64 KiB otherwise. A chunk goes out when full, or after at
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

  const prefix = '{"level":30,"time":';
  const base = `,"pid":${process.pid},"role":"worker","workerId":${workerId},"log":"access","method":`;

  /** Lines not yet in a chunk, and their length (= bytes). */
  let current = '';
  /** Sealed chunks waiting for the write in flight. */
  const queue: string[] = [];
  let queuedBytes = 0;
  let writing: string | null = null;
  let broken = false;
  let waiters: Array<() => void> = [];

  const seal = (): void => {
    if (current.length === 0) return;
    queue.push(current);
    current = '';
  };

  const settleWaiters = (): void => {
    if (writing !== null || queue.length > 0 || current.length > 0) return;
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
    current = '';
    process.emitWarning(`access log: writing to fd ${fd} failed (${err.code ?? err.message}); access logging stops`, 'AccessLogWarning');
    settleWaiters();
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
    if (written < chunk.length) {
      writeChunk(chunk.slice(written));
      return;
    }
    writing = null;
    kick();
  };

  function writeChunk(chunk: string): void {
    if (broken) return;
    writing = chunk;
    write(fd, chunk, null, 'latin1', onWritten);
  }

  const kick = (): void => {
    if (writing !== null || broken) return;
    const next = queue.shift();
    if (next === undefined) {
      settleWaiters();
      return;
    }
    writeChunk(next);
  };

  const timer = setInterval(() => {
    if (current.length === 0) return;
    seal();
    kick();
  }, flushIntervalMs);
  timer.unref();

  process.once('exit', () => {
    // Synchronously, what has not been handed to a write yet (the write in flight may or may not land).
    seal();
    for (const chunk of queue) {
      let rest = chunk;
      for (let attempts = 0; rest.length > 0 && attempts < 1000; attempts++) {
        try {
          rest = rest.slice(writeSync(fd, rest, null, 'latin1'));
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
      const line =
        prefix +
        Date.now() +
        base +
        jsonString(request.method) +
        ',"path":' +
        jsonString(request.path) +
        ',"status":' +
        jsonNumber(request.status) +
        ',"endpoint":' +
        jsonStringOrNull(request.routeTemplate) +
        ',"upstream":' +
        jsonStringOrNull(request.upstream) +
        ',"latencyMs":' +
        jsonNumber(request.latencyMs) +
        ',"bytesIn":' +
        jsonNumber(request.bytesIn) +
        ',"bytesOut":' +
        jsonNumber(request.bytesOut) +
        ',"client":' +
        jsonString(request.clientAddress) +
        ',"msg":"request"}\n';
      if (queuedBytes + line.length > MAX_QUEUED_BYTES) return;
      queuedBytes += line.length;
      if (current.length + line.length > chunkLimit) {
        seal();
        current = line;
        kick();
      } else {
        current += line;
      }
    },
    flush() {
      seal();
      kick();
      if (writing === null && queue.length === 0) return Promise.resolve();
      return new Promise((resolve) => waiters.push(resolve));
    },
  };
}

function jsonNumber(value: number): string {
  return Number.isFinite(value) ? '' + value : 'null';
}

function jsonStringOrNull(value: string | null): string {
  return value === null ? 'null' : jsonString(value);
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
