import { ConfigError, loadConfig, parseConfig } from '../config/load.js';
import { FileReadError, readBoundedFile } from '../config/read-file.js';
import type { GatewayConfig } from '../config/types.js';
import { discoverFromDoc, discoverUpstream, parseDocText, type EndpointProblem } from '../discovery/index.js';
import { fetchDoc, MAX_DOC_BYTES, type FetchedDoc } from '../discovery/fetch-doc.js';
import { RoutingTable } from '../routing/table.js';
import { HostRoutes } from '../edge/host-routes.js';
import type { RouteEntry, TemplateProblem } from '../routing/types.js';
import { printable } from '../text/printable.js';

/**
 * What `routes` and `explain` work on, with no network: the table compiled from the config's `static`
 * upstreams and from doc files given with `--doc` (JSON or YAML, Swagger 2.0 or OpenAPI 3.x). Upstreams
 * of the config that publish a doc are listed as skipped, so the operator knows the table is partial.
 */
export interface OfflineTable {
  config: GatewayConfig | null;
  /** The config, or without one the defaults: what the gateway answers before routing depends on them. */
  settings: GatewayConfig;
  table: RoutingTable;
  problems: TemplateProblem[];
  /**
   * What a validator objects to in each doc file, and what is wrong with a static upstream's templates
   * (`where`: the config file and the upstream's pointer); the endpoints are in the table all the same.
   */
  docProblems: Array<{ file: string; problems: EndpointProblem[]; where?: string }>;
  skipped: string[];
  /** Upstreams whose doc could not be fetched (--fetch), with why. */
  failed: Array<{ upstream: string; reason: string }>;
  /**
   * Without --host, the upstreams that list hosts (with them): left out of the table, which is that of
   * a request whose Host none of them lists, as the gateway routes one. Empty with --host.
   */
  hostedOut: Array<{ upstream: string; hosts: readonly string[] }>;
}

export interface OfflineSources {
  configFile?: string;
  /** Each file (or http(s) URL) is an upstream of its own, keyed by the name as given. */
  docFiles?: readonly string[];
  /** Fetch the docs of the config's upstreams as `gateway start` would (its discovery settings). */
  fetch?: boolean;
  /**
   * Only the endpoints serving this Host (upstreams' `hosts`; doc files serve every host). Without it,
   * those of a Host that names none of the upstreams' hosts: the upstreams that list none.
   */
  host?: string;
}

/** Why the table cannot be built, ready to print: one line per problem, what it quotes escaped (printable). */
export class OfflineTableError extends Error {}

/** Relative OpenAPI 3 server URLs of a doc file are taken relative to "/": where it is served is not known offline. */
const DOC_FILE_URL = 'http://localhost/';

export async function offlineTable({ configFile, docFiles = [], fetch = false, host }: OfflineSources): Promise<OfflineTable> {
  let config: GatewayConfig | null = null;
  if (configFile !== undefined) {
    try {
      config = loadConfig(configFile);
    } catch (err) {
      // A ConfigError's lines are printable already; a newline between them is one between problems.
      if (err instanceof ConfigError) throw new OfflineTableError(err.message);
      throw err;
    }
  }
  const entries: RouteEntry[] = [];
  const skipped: string[] = [];
  const failed: OfflineTable['failed'] = [];
  const docProblems: OfflineTable['docProblems'] = [];
  for (const [index, upstream] of (config?.upstreams ?? []).entries()) {
    if (upstream.serviceType !== 'static' && !fetch) {
      skipped.push(upstream.serviceLocation);
      continue;
    }
    try {
      const discovered = await discoverUpstream(upstream, config!.discovery);
      for (const entry of discovered.entries) entries.push(entry);
      const where = upstream.serviceType === 'static' ? `${configFile}: /upstreams/${index}` : undefined;
      if (discovered.problems && discovered.problems.length > 0) docProblems.push({ file: upstream.serviceLocation, problems: discovered.problems, ...(where ? { where } : {}) });
    } catch (err) {
      failed.push({ upstream: upstream.serviceLocation, reason: (err as Error).message });
    }
  }
  for (const file of docFiles) {
    const discovered = await readDocFile(file);
    for (const entry of discovered.entries) entries.push(entry);
    if (discovered.problems && discovered.problems.length > 0) docProblems.push({ file, problems: discovered.problems });
  }
  const { table, problems } = RoutingTable.compile(entries, { maxUrlBytes: config?.limits.maxUrlBytes });
  const settings = config ?? parseConfig('{}', '(defaults)');
  // The gateway routes a request among the upstreams serving its Host (src/edge/host-routes.ts); a
  // doc file is an upstream that lists no hosts.
  const upstreams = [...(config?.upstreams ?? []), ...docFiles.map((file) => ({ serviceLocation: file }))];
  const hostRoutes = HostRoutes.build(table, upstreams);
  if (hostRoutes === null) return { config, settings, table, problems, docProblems, skipped, failed, hostedOut: [] };
  const hostTable = (host === undefined ? hostRoutes.tableForUnlistedHost() : hostRoutes.tableFor(host)) ?? RoutingTable.compile([]).table;
  const hostedOut = host !== undefined ? [] : (config?.upstreams ?? []).flatMap((u) => (u.hosts !== undefined && u.hosts.length > 0 ? [{ upstream: u.serviceLocation, hosts: u.hosts }] : []));
  return { config, settings, table: hostTable, problems, docProblems, skipped, failed, hostedOut };
}

const isUrl = (name: string): boolean => /^https?:\/\//i.test(name);

async function readDocFile(file: string) {
  if (isUrl(file)) {
    let doc: FetchedDoc;
    try {
      doc = await fetchDoc(file, { fetchTimeoutMs: 5000, retries: 0, backoffMs: 0 });
    } catch (err) {
      throw new OfflineTableError(printable(`${file}: ${(err as Error).message}`));
    }
    try {
      const upstream = { serviceType: 'swagger2' as const, serviceLocation: file, weight: 1, specPath: file };
      return await discoverFromDoc(upstream, doc.value, { docUrl: file, where: file, serviceType: null, duplicates: doc.duplicates });
    } catch (err) {
      throw new OfflineTableError(printable((err as Error).message));
    }
  }
  // Read as the config is: a regular file of at most the size a fetched doc may have. A FIFO is refused
  // (read whole, one without a writer never ended) and so is a device (/dev/zero grew to hundreds of MB).
  let text: string;
  try {
    text = readBoundedFile(file, MAX_DOC_BYTES).toString('utf8');
  } catch (err) {
    if (!(err instanceof FileReadError)) throw err;
    throw new OfflineTableError(printable(`${file}: cannot be read: ${err.message}`));
  }
  const parsed = parseDocText(text);
  if (!parsed.ok) throw new OfflineTableError(printable(`${file}: the file is neither JSON nor YAML: ${parsed.reason}`));
  try {
    // The serviceType is only what the doc says it is: nothing else does, offline.
    const upstream = { serviceType: 'swagger2' as const, serviceLocation: file, weight: 1, specPath: file };
    return await discoverFromDoc(upstream, parsed.value, { docUrl: DOC_FILE_URL, where: file, serviceType: null, duplicates: parsed.duplicates });
  } catch (err) {
    throw new OfflineTableError(printable((err as Error).message));
  }
}

/** Template problems, doc objections and skipped upstreams go to stderr: stdout stays machine-readable. */
export function reportOnStderr({ problems, docProblems, skipped, failed, hostedOut }: OfflineTable): void {
  const say = (line: string): void => console.error(printable(line));
  for (const p of problems) say(`warning: ${p.message}`);
  for (const { file, problems: list, where: upstream } of docProblems) {
    for (const p of list) {
      const where = p.path === null ? '' : `${p.method ?? '(path item)'} ${p.path}: `;
      if (upstream !== undefined && p.pointer !== undefined) say(`warning: ${upstream}/${p.pointer}: ${where}${p.reason}`);
      else say(`warning: doc ${file}: ${where}${p.reason}`);
    }
  }
  for (const { upstream, reason } of failed) say(`warning: upstream ${upstream} is not in the table: ${reason}`);
  if (skipped.length > 0) {
    say(`note: ${skipped.length} upstream(s) publish a doc and are not in this offline table (--fetch fetches them): ${skipped.join(', ')}`);
  }
  if (hostedOut.length > 0) {
    const list = hostedOut.map(({ upstream, hosts }) => `${upstream} (${hosts.join(', ')})`).join(', ');
    say(`note: without --host, the table is that of a request whose Host no upstream lists; ${hostedOut.length} upstream(s) serve only the hosts they list and are left out (--host HOST for a request with that Host): ${list}`);
  }
}
