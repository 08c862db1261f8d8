import { ConfigError, loadConfig } from '../config/load.js';
import type { GatewayConfig } from '../config/types.js';
import { discoverUpstream } from '../discovery/index.js';
import { RoutingTable } from '../routing/table.js';
import type { RouteEntry, TemplateProblem } from '../routing/types.js';

/**
 * What `routes` and `explain` work on: the table compiled from the config's `static` upstreams, with no
 * network. Upstreams that publish a doc are listed as skipped, so the operator knows the table is partial.
 */
export interface OfflineTable {
  config: GatewayConfig;
  table: RoutingTable;
  problems: TemplateProblem[];
  skipped: string[];
}

export class OfflineTableError extends Error {}

export async function offlineTable(configFile: string): Promise<OfflineTable> {
  let config: GatewayConfig;
  try {
    config = loadConfig(configFile);
  } catch (err) {
    if (err instanceof ConfigError) throw new OfflineTableError(err.message);
    throw err;
  }
  const entries: RouteEntry[] = [];
  const skipped: string[] = [];
  for (const upstream of config.upstreams) {
    if (upstream.serviceType !== 'static') {
      skipped.push(upstream.serviceLocation);
      continue;
    }
    const discovered = await discoverUpstream(upstream, { fetchTimeoutMs: 0, retries: 0, backoffMs: 0 });
    entries.push(...discovered.entries);
  }
  const { table, problems } = RoutingTable.compile(entries);
  return { config, table, problems, skipped };
}

/** Template problems and skipped upstreams go to stderr: stdout stays machine-readable. */
export function reportOnStderr({ problems, skipped }: OfflineTable): void {
  for (const p of problems) console.error(`warning: ${p.message}`);
  if (skipped.length > 0) {
    console.error(`note: ${skipped.length} upstream(s) publish a doc and are not in this offline table: ${skipped.join(', ')}`);
  }
}
