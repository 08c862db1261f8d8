// Piscina task: compiles the routing table and renders /spec off the primary's event loop.
import { buildCombinedSpecWithNamespaces } from '../builtins/spec.js';
import { guardSpec } from '../builtins/spec-guard.js';
import { pointerText } from '../discovery/objection.js';
import { toOpenApi3 } from '../builtins/spec-to-openapi3.js';
import type { GatewayConfig } from '../config/types.js';
import type { DiscoveredUpstream } from '../discovery/index.js';
import { HostSets, type HostedUpstream } from '../edge/host-sets.js';
import { RoutingTable, type TransferableTable } from '../routing/table.js';
import type { TemplateProblem } from '../routing/types.js';

export interface CompileInput {
  /** Ready upstreams, in config order. */
  upstreams: readonly DiscoveredUpstream[];
  builtinPaths: GatewayConfig['paths'];
  /** limits.maxUrlBytes: templates no request within it can match are refused. */
  maxUrlBytes?: number;
  /** info.title / info.version of the combined spec. */
  name: string;
  version: string;
  /** Every configured upstream's hosts (ready or not): /spec?host= gets one document per set of upstreams. */
  hosted?: readonly HostedUpstream[];
}

/** The documents of one set of upstreams serving some hosts (only the ready ones among them are described). */
export interface HostSpec {
  /** The set's key (sorted serviceLocations joined by newlines). */
  key: string;
  swagger2: string;
  openapi3: string;
}

export interface RenderedSpec {
  swagger2: string;
  /** The same combination as OpenAPI 3.0 (`?format=openapi3`). */
  openapi3: string;
  /**
   * With upstreams that list hosts: the hosts as configured when this was rendered, and the documents
   * of each set of upstreams a host can get. A worker resolves `?host=` against these, not against its
   * config, so a spec kept from an older publish stays consistent with itself.
   */
  hosts?: { upstreams: HostedUpstream[]; sets: HostSpec[] };
}

export interface CompileOutput {
  table: TransferableTable;
  problems: TemplateProblem[];
  /** The combined spec as JSON text; null when it could not be built (see specError). */
  spec: RenderedSpec | null;
  specError?: string;
  /** Parts of the combined spec replaced so that it validates (JSON pointers), and what still does not. */
  specRepairs?: { repaired: string[]; remaining: string[]; fromEntries: Array<{ upstream: string; reason: string }> };
}

export default async function compile({ upstreams, builtinPaths, maxUrlBytes, name, version, hosted = [] }: CompileInput): Promise<CompileOutput> {
  const { table, problems } = RoutingTable.compile(upstreams.flatMap((u) => u.entries), { maxUrlBytes });
  const transferable = table.toTransferable();
  // A spec that cannot be built must not keep a good table from being served.
  try {
    const info = { title: name, version };
    const { swagger2, openapi3, specRepairs } = await render(upstreams, builtinPaths, info, maxUrlBytes);
    const spec: RenderedSpec = { swagger2, openapi3 };
    const sets = HostSets.sets(hosted);
    if (sets.length > 0) {
      const hostSpecs: HostSpec[] = [];
      for (const set of sets) {
        const members = new Set(set.upstreams);
        const rendered = await render(upstreams.filter((u) => members.has(u.upstream.serviceLocation)), builtinPaths, info, maxUrlBytes);
        hostSpecs.push({ key: set.key, swagger2: rendered.swagger2, openapi3: rendered.openapi3 });
      }
      spec.hosts = { upstreams: hosted.map((u) => ({ serviceLocation: u.serviceLocation, ...(u.hosts ? { hosts: [...u.hosts] } : {}) })), sets: hostSpecs };
    }
    return { table: transferable, problems, spec, ...(specRepairs ? { specRepairs } : {}) };
  } catch (err) {
    return { table: transferable, problems, spec: null, specError: err instanceof Error ? err.message : String(err) };
  }
}

async function render(
  upstreams: readonly DiscoveredUpstream[],
  builtinPaths: GatewayConfig['paths'],
  info: { title: string; version: string },
  maxUrlBytes: number | undefined,
): Promise<{ swagger2: string; openapi3: string; specRepairs?: CompileOutput['specRepairs'] }> {
  const { doc: swagger2, namespaces, fromEntries } = buildCombinedSpecWithNamespaces({ upstreams, builtinPaths, info, maxUrlBytes });
  // Docs without objections combine into a valid doc as they are; only what docs with problems
  // contribute needs the check (the slow path: it dereferences and validates that part).
  let specRepairs: CompileOutput['specRepairs'];
  const sloppy = upstreams.filter((u) => (u.problems?.length ?? 0) > 0).map((u) => u.upstream.serviceLocation);
  if (sloppy.length > 0) {
    const scope = { upstreams: new Set(sloppy), namespaces: new Set(sloppy.map((location) => namespaces.get(location)!)) };
    const { repaired, remaining } = await guardSpec(swagger2, scope);
    if (repaired.length > 0 || remaining.length > 0) {
      specRepairs = { repaired, remaining: remaining.map((o) => `${pointerText(o.pointer)}: ${o.message}`), fromEntries };
    }
  }
  if (fromEntries.length > 0) specRepairs ??= { repaired: [], remaining: [], fromEntries };
  return { swagger2: JSON.stringify(swagger2), openapi3: JSON.stringify(toOpenApi3(swagger2)), ...(specRepairs ? { specRepairs } : {}) };
}
