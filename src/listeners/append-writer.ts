/**
 * The one append-only writer of the gateway's log files (the access log, a listener's mismatch log):
 * whole lines handed over as byte ranges, written without blocking the event loop, safe to share
 * between the processes of the cluster, reopened on demand (log rotation).
 *
 * The destination is a file descriptor (stdout) or a path, opened with O_APPEND | O_CREAT. Each write()
 * carries whole lines only, and at most:
 * - PIPE_BUF (4096) bytes to a pipe or socket, where POSIX makes writes of that size atomic;
 * - 256 KiB to a regular file on a local file system, where Linux moves the offset to the end and
 *   writes under the file's lock, so writes of several processes never interleave (not on NFS).
 * A short write (disk full, a signal) writes the rest in a second write(), which another process's line
 * could precede: the one case a line may come out split.
 *
 * One write is in flight at a time; at most `maxQueuedBytes` wait behind it (more is refused, and the
 * caller told so), so a stuck disk or reader costs bounded memory. reopen() opens the path again and
 * moves to it once the write in flight is done: lines queued before and after all land, in the old
 * file or the new one (logrotate without copytruncate: rename, then reopen).
 *
 * A write that fails (ENOSPC, EIO, EPIPE, ...) drops what is queued and every line until writing
 * works again, counting them (`droppedLines`). A path is opened again by itself after 1 s, then
 * backing off to every 5 s, until a write goes through; a line left half-written by the failure (the
 * file does not end with a newline) gets its newline first, so the next line is not glued to it. A
 * descriptor (stdout) that fails is given up: it cannot be opened again.
 */
import { close as closeFd, fstat, fstatSync, open, write, writeSync } from 'node:fs';
import { open as openFile } from 'node:fs/promises';

/** Writes to a pipe or socket of at most PIPE_BUF bytes are atomic (Linux: 4096). */
export const PIPE_CHUNK = 4096;
/** Regular files (and /dev/null, ttys): a write is never interleaved with other writers' writes. */
export const FILE_CHUNK = 256 * 1024;
const EAGAIN_RETRY_MS = 10;
/** A failed path is opened again after this long, doubling up to RETRY_MAX_MS. */
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 5000;
/** Writing that worked again for less than this before failing again keeps backing off (a disk that fills again at once). */
const RESUMED_STABLE_MS = 30_000;
const NEWLINE = Buffer.from('\n');

export type Destination = { fd: number } | { path: string };

export interface AppendWriterOptions {
  /** Bytes that may wait behind the write in flight; past it push() refuses. */
  maxQueuedBytes: number;
  /**
   * Told once when writing fails: lines are dropped from then on, until a write works again (a path
   * is retried by itself; a descriptor never is).
   */
  onBroken(err: NodeJS.ErrnoException): void;
  /** Told once when a write went through again after onBroken. */
  onResumed?(): void;
  /** A range of `buffer` was written (or dropped): the caller may reuse the buffer once none of its ranges is queued. */
  onReleased?(buffer: Buffer): void;
}

interface Chunk {
  buffer: Buffer;
  start: number;
  end: number;
}

export class AppendWriter {
  /** Resolves once the destination can be written to; rejects with a message naming it. */
  readonly ready: Promise<void>;
  /** Largest write (and so the largest chunk a caller should hand over in one push). */
  chunkLimit = FILE_CHUNK;
  queuedBytes = 0;
  /** Lines refused, or dropped from the queue when writing failed (a half-written one included). */
  droppedLines = 0;
  /** Writing failed and has not worked since. */
  failing = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private retryMs = RETRY_FIRST_MS;
  private resumedAt = Number.NEGATIVE_INFINITY;
  private fd = -1;
  /** Opened by reopen(), taken into use when no write is in flight. */
  private nextFd = -1;
  private readonly ownsFd: boolean;
  private broken = false;
  private closed = false;
  private writing: Chunk | null = null;
  /** Chunks of a write that merged several, released when it is done. */
  private merged: Chunk[] | null = null;
  private readonly queue: Chunk[] = [];
  private waiters: Array<() => void> = [];

  constructor(
    private readonly destination: Destination,
    private readonly options: AppendWriterOptions,
  ) {
    if ('fd' in destination) {
      this.ownsFd = false;
      this.fd = destination.fd;
      try {
        this.chunkLimit = limitFor(fstatSync(destination.fd));
        this.ready = Promise.resolve();
      } catch (err) {
        this.broken = true;
        this.ready = Promise.reject(err);
      }
    } else {
      this.ownsFd = true;
      this.ready = this.openPath().then((fd) => {
        this.fd = fd;
        this.kick();
      });
      this.ready.catch(() => {
        this.broken = true;
        this.dropQueue();
      });
    }
    // Whoever builds the writer awaits it; an unawaited rejection must not take the process down.
    this.ready.catch(() => {});
  }

  /** Queues buffer[start, end): whole lines, at most chunkLimit bytes. False when it was refused. */
  push(buffer: Buffer, start: number, end: number): boolean {
    if (end <= start) return false;
    if (this.broken || this.closed || this.queuedBytes + (end - start) > this.options.maxQueuedBytes) {
      this.droppedLines += countLines(buffer, start, end);
      return false;
    }
    this.queue.push({ buffer, start, end });
    this.queuedBytes += end - start;
    this.kick();
    return true;
  }

  /** Opens the path again and writes there from the next write on; the old descriptor is closed. */
  async reopen(): Promise<void> {
    if (!('path' in this.destination) || this.closed) return;
    const fd = await this.openPath();
    const halfLine = this.failing && (await endsInHalfLine(this.destination.path));
    if (this.closed) {
      closeFd(fd, () => {});
      return;
    }
    if (this.nextFd >= 0) closeFd(this.nextFd, () => {});
    this.nextFd = fd;
    if (this.broken && this.fd < 0) {
      this.broken = false;
      if (this.retryTimer !== null) clearTimeout(this.retryTimer);
      this.retryTimer = null;
    }
    // Queued lines all go to the new descriptor: the newline goes before them.
    if (halfLine) this.queueNewline();
    this.kick();
  }

  /** Resolves once everything queued is written (or dropped). */
  flush(): Promise<void> {
    this.kick();
    if (this.writing === null && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Writes what is queued, waiting at most `drainMs`, then closes a descriptor it opened. */
  async close(drainMs = 2000): Promise<void> {
    if (this.closed) return;
    await this.ready.catch(() => {});
    if (this.writing !== null || this.queue.length > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, drainMs);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    this.closed = true;
    this.broken = true;
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    if (this.ownsFd) {
      for (const fd of [this.fd, this.nextFd]) if (fd >= 0) await new Promise<void>((resolve) => closeFd(fd, () => resolve()));
      this.fd = this.nextFd = -1;
    }
  }

  /** On exit: what is queued, synchronously (the write in flight may or may not land). */
  writeOutSync(): void {
    if (this.broken || this.fd < 0) return;
    for (const chunk of this.queue) {
      for (let attempts = 0; chunk.start < chunk.end && attempts < 1000; attempts++) {
        try {
          chunk.start += writeSync(this.nextFd >= 0 ? this.nextFd : this.fd, chunk.buffer, chunk.start, chunk.end - chunk.start);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== 'EAGAIN') return;
        }
      }
    }
    this.queue.length = 0;
  }

  private openPath(): Promise<number> {
    const path = (this.destination as { path: string }).path;
    return new Promise((resolve, reject) => {
      open(path, 'a', 0o644, (err, fd) => {
        if (err) return reject(new Error(`cannot open ${path} for appending: ${err.code ?? err.message}`));
        fstat(fd, (statErr, stat) => {
          if (!statErr) this.chunkLimit = limitFor(stat);
          resolve(fd);
        });
      });
    });
  }

  private kick(): void {
    if (this.writing !== null) return;
    if (this.nextFd >= 0) {
      // Rotation: no write is in flight, so every earlier line is in the old file.
      const old = this.fd;
      this.fd = this.nextFd;
      this.nextFd = -1;
      if (this.ownsFd && old >= 0) closeFd(old, () => {});
    }
    if (this.broken || this.fd < 0) return;
    const first = this.queue.shift();
    if (first === undefined) {
      this.settle();
      return;
    }
    let chunk = first;
    // Small chunks (lines appended one by one) go out together, up to one write's worth.
    if (this.queue.length > 0 && first.end - first.start < this.chunkLimit) {
      let bytes = first.end - first.start;
      let count = 0;
      while (count < this.queue.length && bytes + (this.queue[count]!.end - this.queue[count]!.start) <= this.chunkLimit) {
        bytes += this.queue[count]!.end - this.queue[count]!.start;
        count++;
      }
      if (count > 0) {
        const parts = [first, ...this.queue.splice(0, count)];
        this.merged = parts;
        chunk = { buffer: Buffer.concat(parts.map((p) => p.buffer.subarray(p.start, p.end)), bytes), start: 0, end: bytes };
      }
    }
    this.writeChunk(chunk);
  }

  private writeChunk(chunk: Chunk): void {
    this.writing = chunk;
    write(this.fd, chunk.buffer, chunk.start, chunk.end - chunk.start, null, this.onWritten);
  }

  private readonly onWritten = (err: NodeJS.ErrnoException | null, written: number): void => {
    const chunk = this.writing!;
    if (err) {
      if (err.code === 'EAGAIN') {
        setTimeout(() => this.writeChunk(chunk), EAGAIN_RETRY_MS);
        return;
      }
      this.fail(err);
      return;
    }
    this.queuedBytes -= written;
    chunk.start += written;
    if (chunk.start < chunk.end) {
      this.writeChunk(chunk);
      return;
    }
    this.writing = null;
    this.release(chunk);
    if (this.failing) this.resumed();
    this.kick();
  };

  private resumed(): void {
    this.failing = false;
    this.resumedAt = Date.now();
    if (!this.closed) this.options.onResumed?.();
  }

  private release(chunk: Chunk): void {
    const onReleased = this.options.onReleased;
    if (onReleased === undefined) return;
    const merged = this.merged;
    this.merged = null;
    if (merged === null) onReleased(chunk.buffer);
    else for (const part of merged) onReleased(part.buffer);
  }

  private fail(err: NodeJS.ErrnoException): void {
    // The destination is gone or full (EPIPE, EBADF, ENOSPC, ...): drop lines rather than pile them up.
    const first = !this.failing;
    this.failing = true;
    this.broken = true;
    // Told before the lines this failure loses are counted: they are lost to it too.
    if (first && !this.closed) this.options.onBroken(err);
    const chunk = this.writing;
    this.writing = null;
    if (chunk !== null) {
      // What a short write left unwritten, the rest of a half-written line included.
      this.droppedLines += countLines(chunk.buffer, chunk.start, chunk.end);
      this.release(chunk);
    }
    this.dropQueue();
    // A path is opened again (retry(), or reopen()); its descriptor is of no more use.
    if (this.ownsFd && this.fd >= 0) {
      closeFd(this.fd, () => {});
      this.fd = -1;
    }
    if (this.ownsFd && !this.closed) this.scheduleRetry(first);
    this.settle();
  }

  private scheduleRetry(afresh: boolean): void {
    if (this.retryTimer !== null) return;
    if (afresh && Date.now() - this.resumedAt >= RESUMED_STABLE_MS) this.retryMs = RETRY_FIRST_MS;
    const delay = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      void this.retry();
    }, delay);
    this.retryTimer.unref();
  }

  /** Opens the path again after a failure; the next write tells whether writing works again. */
  private async retry(): Promise<void> {
    if (this.closed || !this.broken || this.fd >= 0) return;
    const path = (this.destination as { path: string }).path;
    let fd: number;
    try {
      fd = await this.openPath();
    } catch {
      if (!this.closed) this.scheduleRetry(false);
      return;
    }
    const halfLine = await endsInHalfLine(path);
    // Closed, or reopen() took over meanwhile.
    if (this.closed || !this.broken || this.fd >= 0 || this.nextFd >= 0) {
      closeFd(fd, () => {});
      return;
    }
    this.fd = fd;
    this.broken = false;
    if (halfLine) this.queueNewline();
    this.kick();
  }

  private queueNewline(): void {
    this.queue.unshift({ buffer: NEWLINE, start: 0, end: 1 });
    this.queuedBytes += 1;
  }

  private dropQueue(): void {
    const queue = this.queue.splice(0);
    this.queuedBytes = 0;
    for (const chunk of queue) this.droppedLines += countLines(chunk.buffer, chunk.start, chunk.end);
    if (this.options.onReleased !== undefined) for (const chunk of queue) this.options.onReleased(chunk.buffer);
  }

  private settle(): void {
    if (this.writing !== null || this.queue.length > 0) return;
    const done = this.waiters;
    this.waiters = [];
    for (const resolve of done) resolve();
  }
}

function limitFor(stat: { isFIFO(): boolean; isSocket(): boolean }): number {
  return stat.isFIFO() || stat.isSocket() ? PIPE_CHUNK : FILE_CHUNK;
}

/** Newlines in buffer[start, end): the lines of a range of whole lines. */
function countLines(buffer: Buffer, start: number, end: number): number {
  let lines = 0;
  for (let at = buffer.indexOf(0x0a, start); at >= 0 && at < end; at = buffer.indexOf(0x0a, at + 1)) lines++;
  return lines;
}

/** Whether the regular file at `path` ends in a line without its newline (what a failed write can leave). */
async function endsInHalfLine(path: string): Promise<boolean> {
  try {
    const file = await openFile(path, 'r');
    try {
      const stat = await file.stat();
      const size = stat.size;
      if (!stat.isFile() || size === 0) return false;
      const last = Buffer.alloc(1);
      await file.read(last, 0, 1, size - 1);
      return last[0] !== 0x0a;
    } finally {
      await file.close();
    }
  } catch {
    // Not readable: no way to tell, and no newline of our own in the way.
    return false;
  }
}
