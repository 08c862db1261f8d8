// Test support: a gateway's reload outcome as /metrics reports it (lastReload), and a SIGHUP with a
// new config that waits for the outcome of that reload.
import type { ReloadStatus } from '../../src/builtins/healthcheck.js';
import { eventually, httpRequest, type GatewayProcess } from './gateway-process.js';

/** The last reload's status in /metrics (on `port`: the admin listener's, when there is one); undefined before the first reload. */
export async function lastReload(gateway: GatewayProcess, port = gateway.port): Promise<ReloadStatus | undefined> {
  return (JSON.parse((await httpRequest(port, '/metrics')).body) as { lastReload?: ReloadStatus }).lastReload;
}

/**
 * Writes `config` (an object, or text as the file's), sends SIGHUP, and returns the first reload status
 * newer than the one before that `settled` accepts (default: any).
 */
export async function reloadWith(
  gateway: GatewayProcess,
  config: Record<string, unknown> | string,
  {
    settled = () => true,
    timeoutMs = 10_000,
    metricsPort = gateway.port,
  }: { settled?: (status: ReloadStatus) => boolean; timeoutMs?: number; metricsPort?: number } = {},
): Promise<ReloadStatus> {
  const before = await lastReload(gateway, metricsPort);
  gateway.writeConfig(config);
  gateway.signal('SIGHUP');
  return eventually(
    async () => {
      const status = await lastReload(gateway, metricsPort);
      return status && status.at !== before?.at && settled(status) ? status : undefined;
    },
    timeoutMs,
    50,
    'a new lastReload in /metrics',
  );
}
