import { Builtins } from '../builtins/index.js';
import { dropTrailingSlash } from '../http/normalize-path.js';
import type { Route } from '../routing/table.js';
import { OfflineTableError, offlineTable, reportOnStderr, type OfflineTable } from './offline-table.js';
import { UsageError } from './usage-error.js';
import { checkDocSources, checkHost, parseCommandLine } from './arguments.js';
import { printable } from '../text/printable.js';

export const ROUTES_USAGE = `Usage: gateway routes [--config FILE] [--fetch] [--doc FILE|URL ...] [--host HOST] [--json]

Prints the routing table, most specific first, one endpoint per line: METHOD, template, upstream.
Equivalent endpoints (load balanced) are adjacent.

  --config FILE   the config's static upstreams; with --fetch, every upstream's doc too
  --fetch         fetch the docs of the config's upstreams as \`gateway start\` would
                  (without it, upstreams that publish a doc are listed on stderr as skipped)
  --doc FILE|URL  a Swagger 2.0 or OpenAPI 3.x doc (JSON or YAML), read from a file or fetched
                  from an http(s) URL as discovery would; its upstream is the name as given. Repeatable.
  --host HOST     only what a request with that Host header can reach (upstreams' "hosts";
                  docs given with --doc serve every host). Without it, what a request whose
                  Host no upstream lists reaches: upstreams with "hosts" are left out, named on stderr
  --json          one JSON object per line

An endpoint that would get a built-in path (paths.healthcheck, .metrics, .spec) is marked: the gateway
answers that path itself ("shadowed by built-in /spec", or "except /spec (built-in)" for a template
matching other paths too; --json: "shadowedBy" and "shadowed", true when nothing is left to it).

What a validator objects to in a doc goes to stderr.`;

export async function runRoutes(argv: string[]): Promise<number> {
  const { values } = parseCommandLine({ args: argv, options: { config: { type: 'string' }, doc: { type: 'string', multiple: true }, fetch: { type: 'boolean', default: false }, host: { type: 'string' }, json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h' } } });
  if (values.help) {
    console.log(ROUTES_USAGE);
    return 0;
  }
  const docFiles = values.doc ?? [];
  if (!values.config && docFiles.length === 0) throw new UsageError('--config FILE is required unless --doc FILE is given');
  checkDocSources(docFiles);
  checkHost(values.host);
  let offline;
  try {
    offline = await offlineTable({ configFile: values.config, docFiles, fetch: values.fetch, host: values.host });
  } catch (err) {
    if (!(err instanceof OfflineTableError)) throw err;
    console.error(`gateway routes: ${err.message}`);
    return 1;
  }
  reportOnStderr(offline);
  const routes = offline.table.routes();
  const shadowed = shadowedRoutes(offline);
  const width = Math.max(0, ...routes.map((r) => r.method.length));
  const templateWidth = Math.max(0, ...routes.flatMap((r) => r.targets.map((t) => printable(t.template).length)));
  for (const route of routes) {
    const builtinPaths = shadowed.get(route) ?? [];
    // A template without variable segments matches one path: a built-in there leaves it nothing.
    const whole = builtinPaths.length > 0 && route.paramNames.length === 0;
    for (const target of route.targets) {
      if (values.json) {
        const shadow = builtinPaths.length === 0 ? {} : { shadowedBy: builtinPaths, shadowed: whole };
        console.log(printable(JSON.stringify({ method: route.method, template: target.template, canonical: route.canonical, upstream: target.upstream, routeId: route.id, ...shadow })));
      } else {
        const note = builtinPaths.length === 0 ? '' : whole ? `  shadowed by built-in ${builtinPaths[0]}` : `  except ${builtinPaths.join(', ')} (built-in)`;
        console.log(`${route.method.padEnd(width)}  ${printable(target.template).padEnd(templateWidth)}  ${printable(target.upstream)}${note}`);
      }
    }
  }
  return 0;
}

/** The routes that would get a built-in path (paths.*), were it not answered by the gateway first, with those paths. */
function shadowedRoutes({ settings, table }: OfflineTable): Map<Route, string[]> {
  const builtins = new Builtins(settings);
  const paths = Object.values(settings.paths).filter((path) => builtins.builtinFor(path) !== null);
  const methods = new Set(table.routes().map((r) => r.method));
  const shadowed = new Map<Route, string[]>();
  for (const path of paths) {
    for (const method of methods) {
      const route = table.select(method, dropTrailingSlash(path), undefined, undefined, false).route;
      if (route === null) continue;
      const list = shadowed.get(route) ?? [];
      if (!list.includes(path)) list.push(path);
      shadowed.set(route, list);
    }
  }
  return shadowed;
}
