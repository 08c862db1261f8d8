import { parseArgs } from 'node:util';
import { OfflineTableError, offlineTable, reportOnStderr } from './offline-table.js';
import { UsageError } from './usage-error.js';

export const ROUTES_USAGE = `Usage: gateway routes [--config FILE] [--fetch] [--doc FILE|URL ...] [--host HOST] [--json]

Prints the routing table, most specific first, one endpoint per line: METHOD, template, upstream.
Equivalent endpoints (load balanced) are adjacent.

  --config FILE   the config's static upstreams; with --fetch, every upstream's doc too
  --fetch         fetch the docs of the config's upstreams as \`gateway start\` would
                  (without it, upstreams that publish a doc are listed on stderr as skipped)
  --doc FILE|URL  a Swagger 2.0 or OpenAPI 3.x doc (JSON or YAML), read from a file or fetched
                  from a URL as discovery would; its upstream is the name as given. Repeatable.
  --host HOST     only what a request with that Host header can reach (upstreams' "hosts";
                  docs given with --doc serve every host)
  --json          one JSON object per line

What a validator objects to in a doc goes to stderr.`;

export async function runRoutes(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { config: { type: 'string' }, doc: { type: 'string', multiple: true }, fetch: { type: 'boolean', default: false }, host: { type: 'string' }, json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h' } } });
  if (values.help) {
    console.log(ROUTES_USAGE);
    return 0;
  }
  const docFiles = values.doc ?? [];
  if (!values.config && docFiles.length === 0) throw new UsageError('--config FILE is required unless --doc FILE is given');
  const twice = docFiles.find((file, i) => docFiles.indexOf(file) !== i);
  if (twice !== undefined) throw new UsageError(`--doc ${twice} is given twice`);
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
  const width = Math.max(0, ...routes.map((r) => r.method.length));
  const templateWidth = Math.max(0, ...routes.flatMap((r) => r.targets.map((t) => t.template.length)));
  for (const route of routes) {
    for (const target of route.targets) {
      if (values.json) {
        console.log(JSON.stringify({ method: route.method, template: target.template, canonical: route.canonical, upstream: target.upstream, routeId: route.id }));
      } else {
        console.log(`${route.method.padEnd(width)}  ${target.template.padEnd(templateWidth)}  ${target.upstream}`);
      }
    }
  }
  return 0;
}
