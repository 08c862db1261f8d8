/**
 * A file that lines are appended to, shared between processes (every worker of the cluster appends to
 * the same mismatch log): one line per append(), each at most MAX_LINE_BYTES. The writing itself
 * (whole lines per write, bounded queue, reopen on rotation) is the AppendWriter's, which the access
 * log uses too.
 */
import { AppendWriter } from './append-writer.js';
import { MAX_LINE_BYTES } from './mismatch-line.js';

const MAX_QUEUED_BYTES = 1024 * 1024;

export interface AppendLog {
  /** Resolves once the file is open; rejects (with a message naming the path) when it cannot be. */
  readonly ready: Promise<void>;
  /** Queues one line (newline included, at most MAX_LINE_BYTES). False when it was dropped. */
  append(line: string): boolean;
  /** Opens the path again (after the file was rotated away); lines go to the new file from then on. */
  reopen(): Promise<void>;
  /** Writes out what is queued (bounded in time), then closes the file. */
  close(): Promise<void>;
}

/**
 * `onBroken` is told once when writing fails (the log then drops every line until a write works
 * again: the file is opened again by itself every few seconds), `onResumed` once when it works again.
 */
export function openAppendLog(path: string, onBroken: (err: NodeJS.ErrnoException) => void, onResumed?: () => void): AppendLog {
  const writer = new AppendWriter({ path }, { maxQueuedBytes: MAX_QUEUED_BYTES, onBroken, ...(onResumed === undefined ? {} : { onResumed }) });
  let closing = false;
  return {
    ready: writer.ready,
    append(line) {
      if (closing) return false;
      const bytes = Buffer.from(line, 'utf8');
      if (bytes.length > MAX_LINE_BYTES) return false;
      return writer.push(bytes, 0, bytes.length);
    },
    reopen: () => writer.reopen(),
    close() {
      closing = true;
      return writer.close();
    },
  };
}
