/**
 * A `ws` WebSocket server on 127.0.0.1 for WebSocket proxying tests: echoes every message back as it
 * came (text stays text, binary stays binary) unless told otherwise, records what it received and the
 * handshake headers, and can refuse upgrades with an HTTP answer.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import type { Teardown } from './gateway-process.js';

export interface WsUpstreamOptions {
  /** Picks the subprotocol from the offered ones (false: none). Default: none. */
  handleProtocols?: (offered: Set<string>, req: IncomingMessage) => string | false;
  /** An HTTP answer instead of the upgrade ([status, headers, body]), or null to accept. */
  refuse?: (req: IncomingMessage) => [number, Record<string, string>, string] | null;
  /** Replaces the echo: called for each connection. */
  onConnection?: (socket: WebSocket, req: IncomingMessage) => void;
  maxPayload?: number;
}

export interface WsUpstream {
  port: number;
  /** `http://127.0.0.1:<port>`, the serviceLocation. */
  location: string;
  server: Server;
  wss: WebSocketServer;
  /** The handshake requests that were accepted, in order. */
  handshakes: IncomingMessage[];
  /** Every connection accepted, in order. */
  sockets: WebSocket[];
  /** Close codes and reasons the upstream saw, in order. */
  closes: Array<{ code: number; reason: string }>;
  close(): Promise<void>;
}

export async function startWsUpstream(t: Teardown, options: WsUpstreamOptions = {}): Promise<WsUpstream> {
  const handshakes: IncomingMessage[] = [];
  const sockets: WebSocket[] = [];
  const closes: Array<{ code: number; reason: string }> = [];
  const server = createServer((_req, res) => {
    res.writeHead(426, { 'content-type': 'text/plain' });
    res.end('websocket only');
  });
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: options.maxPayload ?? 64 * 1024 * 1024,
    handleProtocols: options.handleProtocols ?? (() => false),
  });
  server.on('upgrade', (req, socket, head) => {
    const refusal = options.refuse?.(req) ?? null;
    if (refusal !== null) {
      const [status, headers, body] = refusal;
      const lines = Object.entries({ ...headers, 'content-length': String(Buffer.byteLength(body)), connection: 'close' }).map(([k, v]) => `${k}: ${v}\r\n`);
      socket.end(`HTTP/1.1 ${status} Refused\r\n${lines.join('')}\r\n${body}`);
      return;
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      handshakes.push(req);
      sockets.push(ws);
      ws.on('close', (code, reason) => closes.push({ code, reason: reason.toString() }));
      ws.on('error', () => {});
      if (options.onConnection) return options.onConnection(ws, req);
      ws.on('message', (data, isBinary) => ws.send(data as Buffer, { binary: isBinary }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  let closed = false;
  const close = async (): Promise<void> => {
    if (closed) return;
    closed = true;
    for (const ws of wss.clients) ws.terminate();
    wss.close();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  };
  t.teardown(close);
  return { port, location: `http://127.0.0.1:${port}`, server, wss, handshakes, sockets, closes, close };
}

/** A static upstream entry routing GET on each of `paths` to `location`. */
export function wsUpstreamConfig(location: string, paths: string[]): Record<string, unknown> {
  return { serviceType: 'static', serviceLocation: location, endpoints: paths.map((path) => ({ method: 'GET', path })) };
}

/** Opens a client; resolves when open, rejects with the HTTP status when the upgrade is refused. */
export function openClient(url: string, protocols: string[] = [], headers: Record<string, string> = {}): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, protocols, { headers });
    socket.once('open', () => resolve(socket));
    socket.once('unexpected-response', (_req, res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => reject(Object.assign(new Error(`refused ${res.statusCode}`), { status: res.statusCode, headers: res.headers, body })));
    });
    socket.once('error', reject);
  });
}

export function nextMessage(socket: WebSocket): Promise<{ data: Buffer; isBinary: boolean }> {
  return new Promise((resolve, reject) => {
    socket.once('message', (data, isBinary) => resolve({ data: data as Buffer, isBinary }));
    socket.once('close', (code) => reject(new Error(`closed ${code} before a message`)));
  });
}

export function closed(socket: WebSocket): Promise<{ code: number; reason: string }> {
  return new Promise((resolve) => {
    if (socket.readyState === WebSocket.CLOSED) return resolve({ code: -1, reason: 'already closed' });
    socket.once('close', (code, reason) => resolve({ code, reason: reason.toString() }));
  });
}

