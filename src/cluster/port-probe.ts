import { createServer } from 'node:net';
import { describeHolders, portHolders } from './port-holder.js';

/**
 * Whether `host:port` can be listened on by this gateway alone. The workers listen with SO_REUSEPORT,
 * so a second gateway on a port would silently share it and take half its connections: before any
 * worker binds, the primary listens once itself without SO_REUSEPORT (node:net never sets it). That
 * fails when anything listens there already, a gateway's workers included.
 *
 * Resolves null when the port is free, else one line naming the port and, when /proc shows it, the holder.
 */
export function probePort(host: string, port: number, what = 'port'): Promise<string | null> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') {
        const holder = describeHolders(portHolders(port));
        resolve(`${what} ${port} on ${host} is already in use${holder ? ` by ${holder}` : ' (by a process this user cannot see)'}: stop it or choose another port`);
      } else if (err.code === 'EACCES') {
        resolve(`${what} ${port} on ${host} cannot be listened on by this user (EACCES): ports below 1024 need privileges`);
      } else {
        resolve(`${what} ${port} on ${host} cannot be listened on: ${err.message}`);
      }
    });
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(null)));
  });
}
