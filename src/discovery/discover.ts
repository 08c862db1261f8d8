import type { ServiceType, UpstreamConfig } from '../config/types.js';
import { docBasePath } from './base-path.js';
import { endpointProblems } from './endpoint-problems.js';
import { entriesFromDoc, entriesFromStatic } from './extract-entries.js';
import { duplicateKeyObjections, type DuplicateKeys } from './duplicate-keys.js';
import { fetchDoc, shownUrl, type FetchedDoc } from './fetch-doc.js';
import { specUrl } from './spec-url.js';
import { docTemplateObjections, staticEndpointProblems } from './template-objections.js';
import { validateDoc } from './validate-doc.js';
import type { DiscoveredUpstream, DiscoveryOptions } from './types.js';
import { printable } from '../text/printable.js';

/**
 * Learns an upstream's endpoints: inline for `static`, else from its doc at serviceLocation + specPath.
 * Rejects with an Error saying why only when the doc cannot be fetched (HTTP status, timeout...), is
 * neither JSON nor YAML, or is not a Swagger 2.0 / OpenAPI 3.x document at all. What a validator objects
 * to is in `problems`; the endpoints are routed all the same. So is a template the router takes but
 * that routes other than it says or never matches (a static upstream's too); one the router refuses
 * is the routing compiler's to report, naming the upstream.
 */
export async function discoverUpstream(upstream: UpstreamConfig, options: DiscoveryOptions): Promise<DiscoveredUpstream> {
  if (upstream.serviceType === 'static') {
    return { upstream, entries: entriesFromStatic(upstream), doc: null, problems: staticEndpointProblems(upstream) };
  }
  const docUrl = specUrl(upstream);
  let fetched: FetchedDoc;
  try {
    fetched = await fetchDoc(docUrl, options, upstream.tls, options.previous?.version);
  } catch (error) {
    // What the upstream answered (a Content-Type, the start of its body) is quoted: escaped for the log.
    throw escaped(error);
  }
  const previous = options.previous;
  // Same doc as last time: its endpoints and problems are what they were (a 30 MB doc cost 2.5 s of CPU to read again).
  if (fetched.unchanged && previous) return previous.upstream === upstream ? previous : { ...previous, upstream };
  const discovered = await discoverFromDoc(upstream, fetched.value, { docUrl, where: shownUrl(docUrl), serviceType: upstream.serviceType, duplicates: fetched.duplicates });
  return fetched.version ? { ...discovered, version: fetched.version } : discovered;
}

export interface DocSource {
  /** Where the doc was read: a relative OpenAPI 3 server URL is relative to it. */
  docUrl: string;
  /** How errors name the doc (its URL, or a file name). */
  where: string;
  /** What the config says the doc is; null when nothing does (a doc file read offline). */
  serviceType: ServiceType | null;
  /** The keys its JSON text holds twice (parseDocText), objected to where they are. */
  duplicates?: DuplicateKeys;
}

/** The endpoints and problems of a parsed doc (fetched, or read from a file). */
export async function discoverFromDoc(upstream: UpstreamConfig, doc: unknown, source: DocSource): Promise<DiscoveredUpstream> {
  try {
    return await readDoc(upstream, doc, source);
  } catch (error) {
    // The validator, the $ref resolver and structuredClone recurse with the doc's nesting; JSON.parse does not.
    if (error instanceof RangeError && /call stack/i.test(error.message)) {
      throw new Error(printable(`${source.where}: the doc nests too deeply to be read (objects or arrays inside one another, hundreds of levels; ${error.message})`), { cause: error });
    }
    throw escaped(error);
  }
}

/** The error, or one with its message printable when it quotes what a terminal must not be sent. */
function escaped(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  const message = printable(error.message);
  return message === error.message ? error : new Error(message, { cause: error });
}

async function readDoc(upstream: UpstreamConfig, doc: unknown, source: DocSource): Promise<DiscoveredUpstream> {
  const validated = await validateDoc(doc, source.serviceType, source.where);
  const objections = [...(source.duplicates ? duplicateKeyObjections(source.duplicates) : []), ...validated.objections];
  const basePath = docBasePath(validated.dereferenced, source.docUrl, objections);
  const entries = entriesFromDoc(validated.dereferenced, upstream.serviceLocation, basePath, objections);
  if (entries.length === 0) {
    objections.push({ pointer: [], message: 'the doc has no operation to route (no path item holds one), so no request reaches this upstream through the gateway' });
  }
  for (const objection of docTemplateObjections(validated.dereferenced, basePath)) objections.push(objection);
  const problems = endpointProblems(objections, validated.dereferenced, validated.kind, basePath);
  return { upstream, entries, doc: doc as object, problems };
}

