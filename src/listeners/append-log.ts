/**
 * A file that lines are appended to without blocking the event loop, safe to share between processes
 * (every worker of the cluster appends to the same mismatch log).
 *
 * The file is opened with O_APPEND | O_CREAT. Lines are written whole: each write() carries one or
 * more complete lines and at most MAX_LINE_BYTES (4096) bytes. What that relies on:
 * - a regular file on a local file system (ext4, xfs, btrfs, tmpfs): Linux moves the offset to the end
 *   and writes under the file's lock, so writes of several processes never interleave or overwrite each
 *   other (they may land in any order). Not on NFS, whose O_APPEND is emulated by the client.
 * - a FIFO or pipe: writes of at most PIPE_BUF (4096) bytes are atomic (POSIX).
 * A short write (disk full, a signal) writes the rest in a second write(), which another process's
 * line could precede; that is the one case a line may come out split.
 *
 * One write is in flight at a time; at most MAX_QUEUED_BYTES wait behind it (more is dropped, and the
 * caller told so), so a stuck disk costs bounded memory.
 */
import { close as closeFd, open, write } from 'node:fs';
import { MAX_LINE_BYTES } from './mismatch-line.js';

const MAX_QUEUED_BYTES = 1024 * 1024;
const EAGAIN_RETRY_MS = 10;
/** close() waits at most this long for queued lines to be written. */
const CLOSE_DRAIN_MS = 2000;

export interface AppendLog {
  /** Resolves once the file is open; rejects (with a message naming the path) when it cannot be. */
  readonly ready: Promise<void>;
  /** Queues one line (newline included, at most MAX_LINE_BYTES). False when it was dropped. */
  append(line: string): boolean;
  /** Writes out what is queued (bounded in time), then closes the file. */
  close(): Promise<void>;
}

/** `onBroken` is told once when writing fails for good (the log then drops every line). */
export function openAppendLog(path: string, onBroken: (err: NodeJS.ErrnoException) => void): AppendLog {
  let fd = -1;
  let broken = false;
  let closing = false;
  let writing = false;
  const queue: Buffer[] = [];
  let queuedBytes = 0;
  let drained: (() => void) | null = null;

  const ready = new Promise<void>((resolve, reject) => {
    open(path, 'a', 0o644, (err, opened) => {
      if (err) {
        broken = true;
        queue.length = 0;
        queuedBytes = 0;
        reject(new Error(`cannot open ${path} for appending: ${err.code ?? err.message}`));
        return;
      }
      fd = opened;
      resolve();
      kick();
    });
  });
  // Whoever builds the log awaits it; an unawaited rejection must not take the process down.
  ready.catch(() => {});

  const fail = (err: NodeJS.ErrnoException): void => {
    broken = true;
    writing = false;
    queue.length = 0;
    queuedBytes = 0;
    // After close() gave up waiting, the write in flight fails on the closed descriptor: not news.
    if (fd >= 0) onBroken(err);
    settle();
  };

  const settle = (): void => {
    if (writing || queue.length > 0 || drained === null) return;
    const done = drained;
    drained = null;
    done();
  };

  const writeOut = (buffer: Buffer): void => {
    write(fd, buffer, 0, buffer.length, null, (err, written) => {
      if (err) {
        if (err.code === 'EAGAIN') {
          setTimeout(writeOut, EAGAIN_RETRY_MS, buffer);
          return;
        }
        fail(err);
        return;
      }
      queuedBytes -= written;
      if (written < buffer.length) {
        writeOut(buffer.subarray(written));
        return;
      }
      writing = false;
      kick();
    });
  };

  /** Sends the next whole lines that fit in one write. */
  const kick = (): void => {
    if (writing || broken || fd < 0) return;
    if (queue.length === 0) {
      settle();
      return;
    }
    let count = 1;
    let bytes = queue[0]!.length;
    while (count < queue.length && bytes + queue[count]!.length <= MAX_LINE_BYTES) bytes += queue[count++]!.length;
    const lines = queue.splice(0, count);
    writing = true;
    writeOut(lines.length === 1 ? lines[0]! : Buffer.concat(lines, bytes));
  };

  return {
    ready,
    append(line) {
      if (broken || closing) return false;
      const bytes = Buffer.from(line, 'utf8');
      if (bytes.length > MAX_LINE_BYTES || queuedBytes + bytes.length > MAX_QUEUED_BYTES) return false;
      queue.push(bytes);
      queuedBytes += bytes.length;
      kick();
      return true;
    },
    async close() {
      if (closing) return;
      closing = true;
      await ready.catch(() => {});
      if (writing || queue.length > 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, CLOSE_DRAIN_MS);
          drained = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      }
      if (fd >= 0) {
        const closed = fd;
        fd = -1;
        broken = true;
        await new Promise<void>((resolve) => closeFd(closed, () => resolve()));
      }
    },
  };
}
