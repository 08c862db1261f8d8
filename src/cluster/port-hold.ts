/**
 * `port: 0` (and a TLS or admin port of 0): a free port, held by the primary until a worker has bound
 * it.
 *
 * Why held: the workers must all bind one concrete port (SO_REUSEPORT), so the primary picks it
 * (findFreePort: the kernel's choice for a port-0 listener, then closed) and the workers bind it once
 * they have loaded, about a second later. Until then the port is free for the kernel to hand to any
 * other process's port-0 listener on the host, and the workers then fail to bind it, again and again
 * (seen in this project's CI: a test upstream took the port a gateway had picked). Held by a uWS
 * listener of the primary's (uWS sets SO_REUSEPORT on a concrete port, which Node's net cannot on
 * Node 20), the port stays taken for everyone but the workers, which join it; the primary lets go once
 * a worker listens. A connection that reaches the primary's listener meanwhile is closed with it;
 * nobody knows a port-0 gateway's port before it says which it is.
 */
import { loadUws } from '../native/uws.js';
import type { UwsListenSocket } from '../native/uws-types.js';
import { findFreePort } from './free-port.js';

export interface HeldPort {
  port: number;
  /** Closes the primary's listener (and whatever it accepted); once is enough, more is harmless. */
  release(): void;
}

/** Picks taken between the pick and the hold (a few microseconds) before the port is left unheld. */
const ATTEMPTS = 5;

export async function holdFreePort(host: string): Promise<HeldPort> {
  const { uws } = loadUws();
  let port = 0;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    port = await findFreePort(host);
    const app = uws.App();
    let socket: UwsListenSocket | false = false;
    // uWS calls back before listen() returns.
    app.listen(host, port, (listening) => {
      socket = listening;
    });
    if (socket !== false) {
      const listening: UwsListenSocket = socket;
      let held = true;
      const release = (): void => {
        if (!held) return;
        held = false;
        uws.us_listen_socket_close(listening);
        app.close?.();
      };
      return { port, release };
    }
    app.close?.();
  }
  return { port, release: () => {} };
}
