// Piscina task: compiles the routing table and renders /spec off the primary's event loop.
import { RoutingTable, type TransferableTable } from '../routing/table.js';
import type { RouteEntry, TemplateProblem } from '../routing/types.js';
import type { GatewayConfig } from '../config/types.js';
import type { DiscoveredUpstream } from '../discovery/index.js';

export interface CompileInput {
  /** Ready upstreams, in config order. */
  upstreams: readonly DiscoveredUpstream[];
  builtinPaths: GatewayConfig['paths'];
}

export interface CompileOutput {
  table: TransferableTable;
  problems: TemplateProblem[];
  /** The combined spec as JSON text. */
  spec: string;
  /** Why the spec could not be built, when it could not. */
  specError?: string;
}

export default async function compile({ upstreams, builtinPaths }: CompileInput): Promise<CompileOutput> {
  const entries: RouteEntry[] = upstreams.flatMap((u) => u.entries);
  const { table, problems } = RoutingTable.compile(entries);
  try {
    const { buildCombinedSpec } = await import('../builtins/spec.js');
    const spec = JSON.stringify(buildCombinedSpec({ upstreams: upstreams as never, builtinPaths } as never));
    return { table: table.toTransferable(), problems, spec };
  } catch (err) {
    const specError = err instanceof Error ? err.message : String(err);
    return { table: table.toTransferable(), problems, spec: JSON.stringify({ swagger: '2.0', info: { title: 'specgate', version: '0' }, paths: {} }), specError };
  }
}
