import type { GatewayConfig } from '../config/types.js';

/**
 * What of `tls` a reload may change: the certificates and HSTS. Whether there is a TLS listener, its
 * port, the plain port's mode and the minimum version change on restart only; the running values stay.
 */
export function keepRestartOnlyTls(current: GatewayConfig, next: GatewayConfig): { config: GatewayConfig; changed: string[] } {
  const before = current.tls;
  const after = next.tls;
  if (before === undefined && after === undefined) return { config: next, changed: [] };
  if (before === undefined || after === undefined) {
    const config: GatewayConfig = { ...next };
    if (before === undefined) delete config.tls;
    else config.tls = before;
    return { config, changed: ['tls'] };
  }
  const changed = (['port', 'plainPort', 'minVersion'] as const).filter((key) => before[key] !== after[key] && !(key === 'port' && after.port === 0)).map((key) => `tls.${key}`);
  return { config: { ...next, tls: { ...after, port: before.port, plainPort: before.plainPort, minVersion: before.minVersion } }, changed };
}
