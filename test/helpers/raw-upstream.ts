/**
 * Upstreams on raw TCP sockets: they write exactly the bytes a test gives them, so tests can send
 * answers no well-behaved server library would (repeated framing headers, dozens of headers, several
 * Connection headers, glued or late answers, ...).
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';

export interface RawServer {
  readonly url: string;
  readonly port: number;
  /** Connections accepted so far. */
  readonly connections: number;
  /** Request heads received (the text up to the blank line), in order. */
  readonly requests: string[];
  /** Sockets open now. */
  readonly sockets: Set<net.Socket>;
  close(): Promise<void>;
}

/**
 * A raw HTTP/1.1 server for bodiless requests: `onHead` gets each request head with its socket and the
 * index of the request on that socket, and writes whatever it likes (or nothing).
 */
export async function startRawServer(onHead: (socket: net.Socket, head: string, indexOnSocket: number) => void): Promise<RawServer> {
  const requests: string[] = [];
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const server = net.createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.setNoDelay(true);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let pending = '';
    let index = 0;
    socket.on('data', (chunk) => {
      pending += chunk.toString('latin1');
      let end: number;
      while ((end = pending.indexOf('\r\n\r\n')) !== -1) {
        const head = pending.slice(0, end);
        pending = pending.slice(end + 4);
        requests.push(head);
        onHead(socket, head, index++);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    get connections() {
      return connections;
    },
    requests,
    sockets,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

/**
 * `answer` gets each request head and returns the bytes to write back. The connection stays open for
 * more requests unless `closeAfter`.
 */
export function startRawUpstream(answer: (head: string) => string | Buffer, options: { closeAfter?: boolean } = {}): Promise<RawServer> {
  return startRawServer((socket, head) => {
    socket.write(answer(head));
    if (options.closeAfter) socket.end();
  });
}

/** A response head with the given headers (name, value pairs) and body; no header is added. */
export function rawResponse(status: string, headers: ReadonlyArray<readonly [string, string]>, body = ''): string {
  return `HTTP/1.1 ${status}\r\n${headers.map(([name, value]) => `${name}: ${value}\r\n`).join('')}\r\n${body}`;
}

/** `count` filler headers (X-Filler-1: 1, ...). */
export function fillers(count: number, from = 1): Array<[string, string]> {
  return Array.from({ length: count }, (_, i) => [`X-Filler-${from + i}`, String(from + i)]);
}
