// Test support: a gateway of 2 workers in front of one static upstream, with one responseCache
// (id "cache", the shared local store) and no access log, and the upstream the cache's end-to-end
// tests put behind it.
import type { ServerResponse } from 'node:http';
import { startGateway, startUpstream, testConfig, type GatewayProcess, type TestUpstream } from './gateway-process.js';

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
