// Test support: a gateway of 2 workers in front of one static upstream, with one responseCache
// (id "cache", the shared local store) and no access log: what the cache's end-to-end tests start.
import { startGateway, testConfig, type GatewayProcess } from './gateway-process.js';

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
