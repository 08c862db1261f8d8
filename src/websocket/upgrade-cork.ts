/**
 * Where the client's upgrade is completed: inside the cork of a response the worker keeps open for
 * that purpose, never inside the upgraded response's own cork.
 *
 * Why: uWS 20.30 (the build that loads here) ends `HttpResponse.cork()` by checking whether the
 * corked socket is still its HTTP socket, by address only. `upgrade()` reallocates the socket for its
 * WebSocket data, usually in place, so the check passes and cork() goes on to read the response's
 * "connection close, answered" bits from what is now WebSocket memory; at random (a few upgrades in a
 * hundred in test/websocket/websocket-upstream-leg.test.ts) they read as set, and uWS shuts the
 * client's socket down right after the 101: the client sees the 101 and a FIN, no close frame (1006).
 * uWS fixed the check upstream in 2026 (it compares the socket context as well). The details and
 * what the client sees are in native-notes.md (WebSockets).
 *
 * An upgrade made inside another response's cork takes none of that path: that response is the
 * corked socket, its own bits are those of a response still pending, and uWS.js counts the call as
 * corked (no warning). The other response is a request this worker sends itself, to a listener of
 * its own on the loopback interface, and never answers. Its one cost: what `upgrade()` writes (the
 * Upgrade, Connection and Sec-WebSocket-Accept lines) goes out in a write per piece instead of in one
 * cork; the status line and the gateway's own header lines still go in one write before it.
 */
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import type { UwsApp, UwsListenSocket, UwsModule, UwsRequest, UwsResponse } from '../native/uws-types.js';

/** How long the worker waits for its own request to arrive before it goes on without it. */
const READY_TIMEOUT_MS = 5_000;

export class UpgradeCork {
  private readonly path = `/${randomBytes(16).toString('hex')}`;
  private app: UwsApp | null = null;
  private listenSocket: UwsListenSocket | null = null;
  private port = 0;
  private client: net.Socket | null = null;
  private held: UwsResponse | null = null;
  private closed = false;
  private waiting: Array<() => void> = [];

  constructor(
    private readonly uws: UwsModule,
    /**
     * Told when the worker cannot listen on the loopback interface, and each time the held response is
     * lost (another is asked for at once); meanwhile upgrades use their own cork.
     */
    private readonly lost: (detail: string) => void = () => {},
  ) {}

  /** Whether an upgrade made now goes through the held response. */
  get ready(): boolean {
    return this.held !== null;
  }

  /** Listens on the loopback interface and sends the request to hold; resolves once it is held (or after READY_TIMEOUT_MS). */
  open(): Promise<void> {
    if (this.app === null) {
      const app = this.uws.App();
      app.any('/*', this.onRequest);
      this.app = app;
      let listening = false;
      app.listen('127.0.0.1', 0, (socket) => {
        if (socket === false) return;
        listening = true;
        this.listenSocket = socket;
        this.port = this.uws.us_socket_local_port(socket);
        this.connect();
      });
      // uWS calls back before listen() returns.
      if (!listening) {
        this.lost('the worker could not listen on 127.0.0.1 for the response upgrades are corked in');
        return Promise.resolve();
      }
    }
    if (this.held !== null) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, READY_TIMEOUT_MS);
      timer.unref();
      this.waiting.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
  }

  /**
   * Runs `upgrade` (which calls `res.upgrade()`) corked: in the held response's cork when there is
   * one, else in `res`'s own (the path uWS 20.30 may close the client on).
   */
  upgrade(res: UwsResponse, upgrade: () => void): void {
    const held = this.held;
    if (held !== null) held.cork(upgrade);
    else res.cork(upgrade);
  }

  /** The loopback listener's port (0 before open() or when it could not listen). */
  get listenPort(): number {
    return this.port;
  }

  close(): void {
    this.closed = true;
    this.held = null;
    this.client?.destroy();
    this.client = null;
    if (this.listenSocket !== null) this.uws.us_listen_socket_close(this.listenSocket);
    this.listenSocket = null;
    this.app?.close?.();
  }

  private connect(): void {
    if (this.closed) return;
    const client = net.connect({ host: '127.0.0.1', port: this.port });
    client.setNoDelay(true);
    // The request is held for the worker's life; it must not keep the process alive.
    client.unref();
    client.on('error', () => {});
    client.on('close', () => {
      if (this.client === client) this.client = null;
    });
    client.write(`GET ${this.path} HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n`);
    this.client = client;
  }

  private readonly onRequest = (res: UwsResponse, req: UwsRequest): void => {
    // Only the worker's own request is held (the listener is reachable by any local process).
    if (req.getUrl() !== this.path || this.held !== null) {
      res.close();
      return;
    }
    res.onAborted(() => {
      if (this.held === res) this.held = null;
      if (this.closed) return;
      this.lost('the response upgrades are corked in was closed; asking for another');
      this.client?.destroy();
      this.client = null;
      this.connect();
    });
    this.held = res;
    const waiting = this.waiting;
    this.waiting = [];
    for (const resolve of waiting) resolve();
  };
}
