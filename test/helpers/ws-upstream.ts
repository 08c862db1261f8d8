/**
 * A `ws` WebSocket server on 127.0.0.1 for WebSocket proxying tests: echoes every message back as it
 * came (text stays text, binary stays binary) unless told otherwise, records what it received and the
 * handshake headers, and can refuse upgrades with an HTTP answer.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import net, { type AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
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
  /** The 101 (or the refusal) is written this long after the upgrade request arrived. */
  answerDelayMs?: number;
  /** Answers a plain HTTP request (default: 426 "websocket only"). */
  http?: (req: IncomingMessage, res: ServerResponse) => void;
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
  const server = createServer((req, res) => {
    if (options.http) return options.http(req, res);
    res.writeHead(426, { 'content-type': 'text/plain' });
    res.end('websocket only');
  });
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: options.maxPayload ?? 64 * 1024 * 1024,
    handleProtocols: options.handleProtocols ?? (() => false),
  });
  server.on('upgrade', (req, socket, head) => {
    if (options.answerDelayMs === undefined) return answer(req, socket, head);
    socket.on('error', () => {});
    setTimeout(() => {
      if (!socket.destroyed) answer(req, socket, head);
    }, options.answerDelayMs);
  });
  const answer = (req: IncomingMessage, socket: Duplex, head: Buffer): void => {
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
  };
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
    keepMessages(socket);
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

interface Message {
  data: Buffer;
  isBinary: boolean;
}

interface Inbox {
  messages: Message[];
  waiting: ((message: Message) => void) | null;
}

const inboxes = new WeakMap<WebSocket, Inbox>();

/**
 * Keeps a client's messages from its first byte on. A message that came in the same read as the 101
 * (an upstream that speaks first, like the chat example) is emitted by ws on a nextTick after 'open',
 * before the awaiting test's continuation could add a listener: without this it was lost, and the
 * test waited for it until tap's timeout.
 */
function keepMessages(socket: WebSocket): void {
  const inbox: Inbox = { messages: [], waiting: null };
  inboxes.set(socket, inbox);
  socket.on('message', (data, isBinary) => {
    const message = { data: data as Buffer, isBinary };
    const waiting = inbox.waiting;
    inbox.waiting = null;
    if (waiting !== null) waiting(message);
    // A test with a listener of its own (counting a firehose) takes its messages itself.
    else if (socket.listenerCount('message') === 1) inbox.messages.push(message);
  });
}

/** The socket's next message (a client from openClient: the oldest one not yet taken). */
export function nextMessage(socket: WebSocket): Promise<Message> {
  const inbox = inboxes.get(socket);
  if (inbox === undefined) {
    return new Promise((resolve, reject) => {
      socket.once('message', (data, isBinary) => resolve({ data: data as Buffer, isBinary }));
      socket.once('close', (code) => reject(new Error(`closed ${code} before a message`)));
    });
  }
  const kept = inbox.messages.shift();
  if (kept !== undefined) return Promise.resolve(kept);
  return new Promise((resolve, reject) => {
    if (socket.readyState === WebSocket.CLOSED) return reject(new Error('closed before a message'));
    const onClose = (code: number): void => {
      inbox.waiting = null;
      reject(new Error(`closed ${code} before a message`));
    };
    inbox.waiting = (message) => {
      socket.off('close', onClose);
      resolve(message);
    };
    socket.once('close', onClose);
  });
}

export function closed(socket: WebSocket): Promise<{ code: number; reason: string }> {
  return new Promise((resolve) => {
    if (socket.readyState === WebSocket.CLOSED) return resolve({ code: -1, reason: 'already closed' });
    socket.once('close', (code, reason) => resolve({ code, reason: reason.toString() }));
  });
}


/** A process's resident set size in bytes (VmRSS), 0 when it cannot be read. */
export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status);
  return kb === null ? 0 : Number(kb[1]) * 1024;
}

/** An upgrade request reaching a raw upstream (rawUpstream). */
export interface RawPeer {
  /** The request head the gateway sent. */
  head: string;
  socket: net.Socket;
  /** The 101 for this request, with `extra` header lines. */
  accept(extra?: string): void;
  /** Bytes after the handshake the gateway wrote (its frames), so far. */
  received(): Buffer;
}

/** A TCP server that hands each upgrade request's head to `onRequest`, which answers as it likes; resolves with its origin. */
export async function rawUpstream(t: Teardown, onRequest: (peer: RawPeer) => void): Promise<string> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let buffered = Buffer.alloc(0);
    let after: Buffer | null = null;
    socket.on('data', (chunk) => {
      if (after !== null) {
        after = Buffer.concat([after, chunk]);
        return;
      }
      buffered = Buffer.concat([buffered, chunk]);
      const end = buffered.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = buffered.toString('latin1', 0, end);
      after = buffered.subarray(end + 4);
      const key = /sec-websocket-key: (.*)/i.exec(head)?.[1]?.trim() ?? '';
      const accept = createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
      onRequest({
        head,
        socket,
        accept: (extra = '') => socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n${extra}\r\n`),
        received: () => after!,
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
