// Test support: a gateway of 2 workers in front of one static upstream, with one responseCache
// (id "cache", the shared local store) and no access log, and the upstream the cache's end-to-end
// tests put behind it.
import type { ServerResponse } from 'node:http';
import { startGateway, startUpstream, testConfig, type GatewayProcess, type TestUpstream } from './gateway-process.js';
import { rawRequest } from './raw-http.js';

type Teardown = Parameters<typeof startGateway>[0];

/** `endpoints` as "METHOD /template"; `cache`: the responseCache's options besides id and type. */
export function startCachingGateway(t: Teardown, location: string, endpoints: string[], cache: Record<string, unknown> = {}): Promise<GatewayProcess> {
  return startGateway(t, {
    config: testConfig(
      [
        {
          serviceType: 'static',
          serviceLocation: location,
          endpoints: endpoints.map((endpoint) => {
            const [method, path] = endpoint.split(' ');
            return { method, path };
          }),
        },
      ],
      { accessLog: { enabled: false }, middleware: [{ id: 'cache', type: 'responseCache', ...cache }] },
    ),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
  });
}

/**
 * The upstream "app": a request of any method but GET (a write, which invalidates) is answered 204;
 * `get` answers a GET, given its path without the query.
 */
export function startCacheUpstream(t: Teardown, get: (path: string, res: ServerResponse) => void): Promise<TestUpstream> {
  return startUpstream(t, {
    name: 'app',
    handle: (req, res) => {
      if (req.method !== 'GET') {
        res.writeHead(204);
        res.end();
        return;
      }
      get((req.url ?? '/').split('?')[0]!, res);
    },
  });
}

/** An answer, and the worker that gave it (its X-Gateway-Worker on the same connection). */
export interface WorkerAnswer {
  worker: string;
  status: number;
  xCache: string | undefined;
  body: string;
}

/**
 * One fresh connection: GET /healthcheck names the worker, then `method target` on that connection
 * with `headers` (each "Name: value\r\n"; Host first) and a 2-byte JSON body for a POST.
 */
export async function askNamingWorker(port: number, method: string, target: string, headers: string): Promise<WorkerAnswer> {
  const host = /^host: [^\r]*\r\n/im.exec(headers)?.[0] ?? 'Host: gw.test\r\n';
  const body = method === 'POST' ? 'Content-Length: 2\r\n' : '';
  const payload = `GET /healthcheck HTTP/1.1\r\n${host}\r\n${method} ${target} HTTP/1.1\r\n${headers}${body}\r\n${method === 'POST' ? '{}' : ''}`;
  const result = await rawRequest(port, payload, { responses: 2, waitMs: 10_000 });
  const [health, answer] = result.responses;
  if (!health?.complete || !answer?.complete) throw new Error(`${method} ${target}: no complete answer`);
  return { worker: health.headers['x-gateway-worker']![0]!, status: answer.status, xCache: answer.headers['x-cache']?.[0], body: answer.body.toString() };
}

/** The first answer of each of 2 workers to GET `target` (fresh connections spread over the workers). */
export async function eachWorkerAnswer(port: number, target: string, headers: string): Promise<Map<string, WorkerAnswer>> {
  const seen = new Map<string, WorkerAnswer>();
  for (let i = 0; i < 80 && seen.size < 2; i++) {
    const answer = await askNamingWorker(port, 'GET', target, headers);
    if (!seen.has(answer.worker)) seen.set(answer.worker, answer);
  }
  if (seen.size < 2) throw new Error('both workers never answered');
  return seen;
}
