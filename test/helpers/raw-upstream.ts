/**
 * An upstream on a raw TCP socket: it writes exactly the bytes a test gives it, so tests can send
 * answers no well-behaved server library would (repeated framing headers, dozens of headers, several
 * Connection headers, ...).
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface RawUpstream {
  readonly url: string;
  readonly port: number;
  /** Request heads received, in order. */
  readonly requests: string[];
  close(): Promise<void>;
}

/**
 * `answer` gets each request head (the text up to the blank line; request bodies are not expected) and
 * returns the bytes to write back. The connection stays open for more requests unless `closeAfter`.
 */
export async function startRawUpstream(answer: (head: string) => string | Buffer, options: { closeAfter?: boolean } = {}): Promise<RawUpstream> {
  const requests: string[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let pending = '';
    socket.on('data', (chunk) => {
      pending += chunk.toString('latin1');
      let end: number;
      while ((end = pending.indexOf('\r\n\r\n')) !== -1) {
        const head = pending.slice(0, end);
        pending = pending.slice(end + 4);
        requests.push(head);
        socket.write(answer(head));
        if (options.closeAfter) socket.end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A response head with the given headers (name, value pairs) and body; no header is added. */
export function rawResponse(status: string, headers: ReadonlyArray<readonly [string, string]>, body = ''): string {
  return `HTTP/1.1 ${status}\r\n${headers.map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n${body}`;
}

/** `count` filler headers (X-Filler-1: 1, ...). */
export function fillers(count: number, from = 1): Array<[string, string]> {
  return Array.from({ length: count }, (_, i) => [`X-Filler-${from + i}`, String(from + i)]);
}
