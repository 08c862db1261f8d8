import { createServer } from 'node:net';

/**
 * A port that is free on `host` right now. Used for `port: 0`: every worker must listen on the same
 * port (SO_REUSEPORT), and a uWS socket bound to port 0 does not let others join it.
 */
export function findFreePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host, port: 0, exclusive: true }, () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
