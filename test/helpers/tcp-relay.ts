/**
 * A TCP relay on a free 127.0.0.1 port to `target` (a Redis of the test's), whose client-to-server
 * bytes can be held back: a server that is slow, or silent, for the clients behind the relay only.
 */
import { connect, createServer, type Socket } from 'node:net';

export interface TcpRelay {
  readonly port: number;
  /** From now on, what clients send waits in the relay. */
  hold(): void;
  /** What waited goes on, in order, and the relay passes bytes at once again. */
  release(): void;
  close(): Promise<void>;
}

export async function startTcpRelay(target: { host: string; port: number }): Promise<TcpRelay> {
  let held = false;
  const waiting: Array<{ server: Socket; chunk: Buffer }> = [];
  const sockets = new Set<Socket>();
  const relay = createServer((client) => {
    const server = connect(target);
    for (const socket of [client, server]) {
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => {
        sockets.delete(socket);
        client.destroy();
        server.destroy();
      });
    }
    client.on('data', (chunk: Buffer) => {
      if (held) waiting.push({ server, chunk });
      else server.write(chunk);
    });
    server.pipe(client);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  return {
    port: (relay.address() as { port: number }).port,
    hold: () => {
      held = true;
    },
    release: () => {
      held = false;
      for (const { server, chunk } of waiting.splice(0)) server.write(chunk);
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => relay.close(() => resolve()));
    },
  };
}
