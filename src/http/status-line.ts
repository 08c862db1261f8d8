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
