/**
 * Reads a file the config names (the config itself, PEM files) when it is a regular file of at most
 * `maxBytes`; otherwise says why in words a config error can quote. A device (`/dev/zero`), a FIFO or a
 * socket is refused before it is read: read whole, /dev/zero took gigabytes of memory and a FIFO never
 * ended. Opened non-blocking, so a FIFO without a writer does not hold the open itself.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

/** The largest PEM file read (a certificate chain with its key is a few KiB; a CA bundle about 250 KiB). */
export const MAX_PEM_BYTES = 4 * 1024 * 1024;

/** Why a file could not be read, as a config error says it. */
export class FileReadError extends Error {}

export function readBoundedFile(path: string, maxBytes: number): Buffer {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    throw new FileReadError(openProblem(err));
  }
  try {
    const stat = fstatSync(fd);
    if (stat.isDirectory()) throw new FileReadError('is a directory, not a file');
    if (!stat.isFile()) throw new FileReadError('is not a regular file (a device, a pipe or a socket)');
    if (stat.size > maxBytes) throw new FileReadError(`is ${stat.size} bytes, more than the ${maxBytes} read from such a file`);
    const buffer = Buffer.alloc(stat.size);
    let read = 0;
    while (read < buffer.length) {
      const n = readSync(fd, buffer, read, buffer.length - read, read);
      if (n === 0) break;
      read += n;
    }
    return read === buffer.length ? buffer : buffer.subarray(0, read);
  } catch (err) {
    if (err instanceof FileReadError) throw err;
    throw new FileReadError(openProblem(err));
  } finally {
    closeSync(fd);
  }
}

function openProblem(err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ENOENT') return 'no such file';
  if (code === 'EACCES') return 'permission denied';
  if (code === 'EISDIR') return 'is a directory, not a file';
  return (err as Error).message;
}
