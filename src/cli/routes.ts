import { parseArgs } from 'node:util';
import { OfflineTableError, offlineTable, reportOnStderr } from './offline-table.js';
import { UsageError } from './start.js';

export const ROUTES_USAGE = `Usage: gateway routes [--config FILE] [--doc FILE ...] [--host HOST] [--json]

Prints the routing table compiled from the config's static upstreams and from doc files, most
specific first, one endpoint per line: METHOD, template, upstream. Equivalent endpoints (load
balanced) are adjacent. --doc reads a Swagger 2.0 or OpenAPI 3.x doc (JSON or YAML) from a file, as
discovery would read it from an upstream; its upstream is the file name. It may be given several
times. What a validator objects to in a doc goes to stderr. --host lists only what a request with that
Host header can reach (upstreams' "hosts"; doc files serve every host).`;

export async function runRoutes(argv: string[]): Promise<number> {
  const { values } = parseArgs({ args: argv, options: { config: { type: 'string' }, doc: { type: 'string', multiple: true }, host: { type: 'string' }, json: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h' } } });
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
    offline = await offlineTable({ configFile: values.config, docFiles, host: values.host });
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
