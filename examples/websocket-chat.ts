/**
 * A chat-style WebSocket upstream for trying the gateway's WebSocket proxying (docs/websocket.md):
 * `node dist/examples/websocket-chat.js [port]` (default 9105). Clients join a room with
 * `GET /chat/{room}` upgraded to a WebSocket; every text message is sent to everyone in the room as
 * `{ "from": <name>, "text": <message> }`. The name is the `X-Consumer` the gateway's apiKeyAuth adds,
 * else the `name` query parameter, else "anonymous". Subprotocol `chat.v1` is chosen when offered.
 * The Swagger doc at /spec declares the endpoint, so the upstream can be discovered as `swagger2`.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { WebSocketServer, type WebSocket } from 'ws';

export const CHAT_PORT = 9105;

export const chatDoc = {
  swagger: '2.0',
  info: { title: 'chat', version: '1.0.0', description: 'Example chat service: WebSocket rooms.' },
  paths: {
    '/chat/{room}': {
      get: {
        operationId: 'joinRoom',
        summary: 'Join a room (upgrade to a WebSocket)',
        parameters: [
          { name: 'room', in: 'path', required: true, type: 'string' },
          { name: 'name', in: 'query', type: 'string', description: 'Name shown to the others' },
        ],
        responses: { 101: { description: 'Switching Protocols' } },
      },
    },
  },
};

export interface ChatUpstream {
  url: string;
  port: number;
  close(): Promise<void>;
}

export async function startChatUpstream(port = CHAT_PORT, host = '127.0.0.1'): Promise<ChatUpstream> {
  const rooms = new Map<string, Set<WebSocket>>();
  const server: Server = createServer((req, res) => {
    if (req.url === '/spec') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify(chatDoc));
      return;
    }
    res.writeHead(426, { 'content-type': 'text/plain', upgrade: 'websocket' });
    res.end('this endpoint speaks WebSocket only\n');
  });
  const wss = new WebSocketServer({
    server,
    handleProtocols: (offered) => (offered.has('chat.v1') ? 'chat.v1' : false),
  });
  wss.on('connection', (socket, req) => {
    const url = new URL(req.url ?? '/', 'http://chat');
    const match = /^\/chat\/([^/]+)$/.exec(url.pathname);
    if (match === null) return socket.close(4404, 'no such room');
    const room = decodeURIComponent(match[1]!);
    const consumer = req.headers['x-consumer'];
    const name = (typeof consumer === 'string' ? consumer : null) ?? url.searchParams.get('name') ?? 'anonymous';
    let members = rooms.get(room);
    if (members === undefined) rooms.set(room, (members = new Set()));
    members.add(socket);
    const say = (text: string, from: string): void => {
      const line = JSON.stringify({ from, text });
      for (const member of members) if (member.readyState === member.OPEN) member.send(line);
    };
    say(`${name} joined`, 'room');
    socket.on('message', (data, isBinary) => {
      if (!isBinary) say(data.toString(), name);
    });
    socket.on('close', () => {
      members.delete(socket);
      if (members.size === 0) rooms.delete(room);
      else say(`${name} left`, 'room');
    });
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  const bound = (server.address() as AddressInfo).port;
  return {
    url: `http://${host}:${bound}`,
    port: bound,
    close: () =>
      new Promise<void>((resolve) => {
        for (const client of wss.clients) client.terminate();
        wss.close();
        server.close(() => resolve());
      }),
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const port = process.argv[2] === undefined ? CHAT_PORT : Number(process.argv[2]);
  const chat = await startChatUpstream(port);
  console.log(`chat upstream on ${chat.url} (doc at ${chat.url}/spec, rooms at ws://127.0.0.1:${chat.port}/chat/{room})`);
}
