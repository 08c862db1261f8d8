/**
 * Example upstreams for trying the gateway: `node dist/examples/upstreams.js` starts them on
 * 127.0.0.1:9101..9104 (see config/default.json). Every answer is JSON saying which service and
 * instance answered and what it received, so routing and load balancing can be watched with curl.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { describeHolders, portHolders } from '../src/cluster/port-holder.js';
import { catalogDoc, filesDoc, usersDoc } from './upstream-docs.js';

export const EXAMPLE_BASE_PORT = 9101;

interface ExampleService {
  name: string;
  service: string;
  doc: object;
}

const SERVICES: readonly ExampleService[] = [
  { name: 'users', service: 'users', doc: usersDoc },
  { name: 'files', service: 'files', doc: filesDoc },
  { name: 'catalog-a', service: 'catalog', doc: catalogDoc },
  { name: 'catalog-b', service: 'catalog', doc: catalogDoc },
];

export interface ExampleUpstreams {
  servers: Array<{ name: string; url: string }>;
  close(): Promise<void>;
}

/** Starts the four example services on basePort..basePort+3 (basePort 0: any free ports). */
export async function startExampleUpstreams(basePort = EXAMPLE_BASE_PORT): Promise<ExampleUpstreams> {
  const started: Array<{ name: string; url: string; server: Server }> = [];
  const close = () => Promise.all(started.map(({ server }) => stop(server))).then(() => undefined);
  try {
    for (const [index, example] of SERVICES.entries()) {
      const server = createServer((request, response) => answer(example, request, response));
      const port = await listen(server, basePort === 0 ? 0 : basePort + index, example.name);
      started.push({ name: example.name, url: `http://127.0.0.1:${port}`, server });
    }
  } catch (error) {
    await close();
    throw error;
  }
  return { servers: started.map(({ name, url }) => ({ name, url })), close };
}

function answer(example: ExampleService, request: IncomingMessage, response: ServerResponse): void {
  const url = new URL(request.url ?? '/', 'http://example.invalid');
  let bodyBytes = 0;
  request.on('data', (chunk: Buffer) => (bodyBytes += chunk.length));
  request.on('end', () => {
    const body =
      url.pathname === '/spec'
        ? example.doc
        : {
            service: example.service,
            instance: example.name,
            port: (request.socket.address() as AddressInfo).port,
            method: request.method,
            path: url.pathname,
            query: url.search,
            bodyBytes,
            forwardedFor: request.headers['x-forwarded-for'] ?? null,
            via: request.headers.via ?? null,
          };
    const text = JSON.stringify(body, null, 2);
    response.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    response.end(request.method === 'HEAD' ? undefined : text);
  });
}

/** A port already in use is one line naming it (and its holder when /proc shows it), not a stack trace. */
function listen(server: Server, port: number, name: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EADDRINUSE') return reject(err);
      const holder = describeHolders(portHolders(port));
      reject(new Error(`example upstream "${name}": port ${port} on 127.0.0.1 is already in use${holder ? ` by ${holder}` : ''}`));
    });
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

function stop(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

const runDirectly = process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href;
if (runDirectly) {
  let examples: ExampleUpstreams;
  try {
    examples = await startExampleUpstreams();
  } catch (err) {
    console.error((err as Error).message);
    process.exit(1);
  }
  for (const { name, url } of examples.servers) console.log(`${name.padEnd(10)} ${url}  (doc: ${url}/spec)`);
  console.log('Stop with Ctrl-C.');
  const shutdown = () => void examples.close().then(() => process.exit(0));
  process.once('SIGINT', shutdown);
  process.once('SIGTERM', shutdown);
}
