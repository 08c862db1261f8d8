import { Builtins } from '../builtins/index.js';
import { AcceptPhase } from '../lifecycle/accept.js';
import { OfflineTableError, offlineTable, reportOnStderr } from './offline-table.js';
import { UsageError } from './usage-error.js';
import { checkContentType, checkDocSources, checkHost, checkMethod, parseCommandLine } from './arguments.js';
import { printable } from '../text/printable.js';
import { UWS_METHODS } from '../native/uws-methods.js';

export const EXPLAIN_USAGE = `Usage: gateway explain [--config FILE] [--fetch] [--doc FILE|URL ...] [--host HOST] [--content-type TYPE] [--accept ACCEPT] METHOD PATH [METHOD PATH ...]

For each request, prints one JSON line saying what the gateway would do with it:
  {"method","path","status","endpoint":{"method","template"}|null,"allow":[...],"upstreams":[...],"params":{...}}
The gateway's own answers come first, as it gives them: a request target it refuses (too long, a
character that must be percent-encoded, an encoded slash under encodedSlashes "reject", a path that climbs
above the root) is its 4xx with "detail", and a built-in path (paths.healthcheck, .metrics, .spec) is
its answer with "builtin" naming it, whatever the upstreams declare. PATH may carry a query string; it is
not used for routing. METHOD is case-sensitive (get is not GET); a method uWebSockets.js does not
deliver (outside ${[...UWS_METHODS].join(' ')}) gets a "note" saying the
connection is closed with no answer. --content-type marks the requests as having
a body of that type. Works on the config's static upstreams, on every upstream's doc with --fetch
(fetched as \`gateway start\` would), and on docs given with --doc (a file or an http(s) URL, JSON or
YAML, may be repeated; the name as given is the upstream). --host routes as a request with that Host header
(upstreams' "hosts"); a host no upstream serves is 404. Without --host, as a request whose Host no
upstream lists: among the upstreams without "hosts" (those left out are named on stderr).`;

/** What a request with a method uWS does not deliver gets: explain's status is then only the table's. */
const UNDELIVERED = `not delivered: uWebSockets.js closes the connection at a method outside ${[...UWS_METHODS].join(' ')} (case-sensitive), with no answer; status is what the gateway would answer were it delivered`;

export async function runExplain(argv: string[]): Promise<number> {
  const { values, positionals } = parseCommandLine({
    args: argv,
    allowPositionals: true,
    options: { config: { type: 'string' }, doc: { type: 'string', multiple: true }, fetch: { type: 'boolean', default: false }, host: { type: 'string' }, 'content-type': { type: 'string' }, accept: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
  });
  if (values.help) {
    console.log(EXPLAIN_USAGE);
    return 0;
  }
  const docFiles = values.doc ?? [];
  if (!values.config && docFiles.length === 0) throw new UsageError('--config FILE is required unless --doc FILE is given');
  checkDocSources(docFiles);
  checkHost(values.host);
  checkContentType(values['content-type']);
  if (positionals.length === 0 || positionals.length % 2 !== 0) throw new UsageError('give requests as METHOD PATH pairs');
  for (let i = 0; i < positionals.length; i += 2) checkMethod(positionals[i]!);
  let offline;
  try {
    offline = await offlineTable({ configFile: values.config, docFiles, fetch: values.fetch, host: values.host });
  } catch (err) {
    if (!(err instanceof OfflineTableError)) throw err;
    console.error(`gateway explain: ${err.message}`);
    return 1;
  }
  reportOnStderr(offline);
  // What the gateway answers before routing, from the same code: the accept phase's checks of the
  // request target, then the built-in paths (a ready gateway's: /healthcheck is 503 until then).
  const accept = new AcceptPhase(offline.settings, '');
  const builtins = new Builtins(offline.settings);
  builtins.setHealth(200, '{}');
  const contentType = values['content-type'];
  const headers = { accept: values.accept, 'content-type': contentType };
  for (let i = 0; i < positionals.length; i += 2) {
    // Methods are case-sensitive (RFC 9110 9.1): `get` is not GET, and the table answers for it as it is.
    const method = positionals[i]!;
    const path = positionals[i + 1]!;
    const query = path.indexOf('?');
    const base = { method, path };
    const print = (answer: object): void => console.log(printable(JSON.stringify(UWS_METHODS.has(method) ? answer : { ...answer, note: UNDELIVERED })));
    const target = accept.checkTarget(query === -1 ? path : path.slice(0, query), query === -1 ? '' : path.slice(query + 1));
    if (typeof target !== 'string') {
      print({ ...base, status: target.answer.status, endpoint: null, allow: [], upstreams: [], params: {}, detail: target.answer.detail });
      continue;
    }
    const builtin = builtins.builtinFor(target);
    if (builtin !== null) {
      // No metrics source here: the answer is the fixed one (await for the type's sake).
      const answer = (await builtins.handle(method, target, query === -1 ? '' : path.slice(query + 1), headers))!;
      const allow = answer.headers.allow;
      print({ ...base, status: answer.status, endpoint: null, allow: allow === undefined ? [] : allow.split(', '), upstreams: [], params: {}, builtin });
      continue;
    }
    const selection = offline.table.select(method, target, contentType, values.accept, contentType !== undefined);
    const route = selection.route;
    print({
      ...base,
      status: selection.status,
      endpoint: route && selection.status === 200 ? { method: route.method, template: route.template } : null,
      allow: selection.allow === '' ? [] : selection.allow.split(', '),
      upstreams: selection.status === 200 ? selection.targets.map((t) => t.upstream) : [],
      params: route && selection.status === 200 ? offline.table.params() : {},
    });
  }
  return 0;
}
