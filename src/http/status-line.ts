import { STATUS_CODES } from 'node:http';

const cache: string[] = [];

/** "200 OK" for uWS writeStatus, built once per code. */
export function statusLine(status: number): string {
  let line = cache[status];
  if (line === undefined) {
    line = `${status} ${STATUS_CODES[status] ?? 'Unknown'}`;
    if (status >= 100 && status < 1000) cache[status] = line;
  }
  return line;
}

const bytesCache: Buffer[] = [];

/**
 * statusLine() as bytes: uWS takes a Buffer without converting it (a string costs it a UTF-8 copy,
 * about 90 ns more per call, measured with uWS 20.30).
 */
export function statusLineBytes(status: number): Buffer {
  let bytes = bytesCache[status];
  if (bytes === undefined) {
    bytes = Buffer.from(statusLine(status), 'latin1');
    if (status >= 100 && status < 1000) bytesCache[status] = bytes;
  }
  return bytes;
}
