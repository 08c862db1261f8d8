import { ConfigError, loadConfig } from '../config/load.js';
import { configWarnings } from '../config/semantic-checks.js';
import type { GatewayConfig } from '../config/types.js';
import { discoverUpstream } from '../discovery/index.js';
import { RoutingTable } from '../routing/table.js';
import type { RouteEntry, TemplateProblem } from '../routing/types.js';
import { UsageError } from './usage-error.js';
import { parseCommandLine } from './arguments.js';
import { printable } from '../text/printable.js';

export const CHECK_USAGE = `Usage: gateway check [--config FILE] [--fetch]

Checks a config the way "gateway start" reads it (schema, rules, TLS files, \${VAR} substitution)
and compiles the routes of its static upstreams. With --fetch it also fetches every upstream's doc
(discovery settings of the config: timeout, retries) and checks it and its routes as start would.
Every problem goes to stderr, one per line; what a doc validator objects to is a warning (start
routes those endpoints all the same), and so is a config the gateway runs as written but that is
likely a mistake (a middleware order that skips a check). Exits 0 when there is no problem, 1 otherwise.

  --config FILE   the config to check (default: $GATEWAY_CONFIG)
  --fetch         fetch and check every upstream doc too`;

/** `gateway check`: like `nginx -t`, every problem listed, exit 0 or 1. */
export async function runCheck(argv: string[]): Promise<number> {
  const { values } = parseCommandLine({
    args: argv,
    options: { config: { type: 'string' }, fetch: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) {
    console.log(CHECK_USAGE);
    return 0;
  }
  const file = values.config ?? process.env.GATEWAY_CONFIG;
  if (!file) throw new UsageError('--config FILE is required (or set GATEWAY_CONFIG)');

  let config: GatewayConfig;
  try {
    config = loadConfig(file);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    for (const line of err.message.split('\n')) console.error(`error: ${line}`);
    return failed(file, err.problems.length);
  }

  const problems: string[] = [];
  const warnings: string[] = configWarnings(config).map((w) => `${file}: ${w.pointer}: ${w.reason}`);
  const entries: RouteEntry[] = [];
  const options = { fetchTimeoutMs: config.discovery.fetchTimeoutMs, retries: config.discovery.retries, backoffMs: config.discovery.backoffMs };
  const checked = config.upstreams.filter((u) => values.fetch || u.serviceType === 'static');
  const results = await Promise.allSettled(checked.map((upstream) => discoverUpstream(upstream, options)));
  let fetched = 0;
  results.forEach((result, i) => {
    const upstream = checked[i]!;
    if (result.status === 'rejected') {
      problems.push(`upstream ${upstream.serviceLocation}: ${(result.reason as Error).message ?? String(result.reason)}`);
      return;
    }
    if (upstream.serviceType !== 'static') fetched++;
    for (const entry of result.value.entries) entries.push(entry);
    for (const p of result.value.problems ?? []) {
      const where = p.path === null ? '' : `${p.method ?? '(path item)'} ${p.path}: `;
      // A static upstream's endpoints are in this file: named as a config problem is, by its pointer.
      if (p.pointer !== undefined) warnings.push(`${file}: /upstreams/${config.upstreams.indexOf(upstream)}/${p.pointer}: ${where}${p.reason}`);
      else warnings.push(`upstream ${upstream.serviceLocation}: doc: ${where}${p.reason}`);
    }
  });
  const compiled = RoutingTable.compile(entries, { maxUrlBytes: config.limits.maxUrlBytes });
  for (const p of compiled.problems) problems.push(templateProblem(file, config, p));

  for (const w of warnings) console.error(printable(`warning: ${w}`));
  for (const p of problems) console.error(printable(`error: ${p}`));
  if (problems.length > 0) return failed(file, problems.length);
  const skipped = config.upstreams.length - checked.length;
  const docs = values.fetch ? `, ${fetched} doc(s) fetched` : skipped > 0 ? `; ${skipped} upstream doc(s) not fetched (--fetch checks them)` : '';
  console.log(`gateway check: ${printable(file)} is ok: ${config.upstreams.length} upstream(s), ${compiled.table.routes().length} route(s)${docs}${warnings.length > 0 ? `, ${warnings.length} warning(s)` : ''}`);
  return 0;
}

/**
 * A template the router refuses. One of a static upstream is in this file: named by its endpoint's
 * pointer, as a config problem is (start serves the other endpoints and logs it; check fails on it).
 * Of an equivalent pair the one ignored is the later.
 */
function templateProblem(file: string, config: GatewayConfig, problem: TemplateProblem): string {
  const index = config.upstreams.findIndex((u) => u.serviceLocation === problem.upstream);
  const upstream = config.upstreams[index];
  if (upstream?.serviceType !== 'static') return problem.message;
  const endpoints = upstream.endpoints ?? [];
  let at = -1;
  endpoints.forEach((endpoint, j) => {
    if (endpoint.path === problem.template && endpoint.method.toUpperCase() === problem.method) at = j;
  });
  if (at < 0) return problem.message;
  return `${file}: /upstreams/${index}/endpoints/${at}/path: template ${JSON.stringify(problem.template)} (${problem.method}): ${problem.reason}`;
}

function failed(file: string, count: number): number {
  console.error(`gateway check: ${printable(file)} has ${count} problem(s)`);
  return 1;
}
