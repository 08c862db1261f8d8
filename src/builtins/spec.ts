import { docBasePath } from '../discovery/base-path.js';
import { specUrl } from '../discovery/spec-url.js';
import { isObject } from '../discovery/objection.js';
import { swaggerPath, type SwaggerPath } from '../discovery/swagger-path.js';
import type { DiscoveredUpstream } from '../discovery/types.js';
import { compareSpecificity } from '../routing/specificity.js';
import { parseTemplate, shortestMatchLength, type ParsedTemplate } from '../routing/template.js';
import { DEFAULT_MAX_URL_BYTES } from '../edge/request-line.js';
import { BUILTIN_NAMESPACE, builtinPart } from './spec-builtin-endpoints.js';
import { partFromOpenapi3 } from './spec-from-openapi3.js';
import { partFromStatic } from './spec-from-static.js';
import { partFromSwagger2 } from './spec-from-swagger2.js';
import { NamespaceAllocator } from './spec-namespace.js';
import { alignPathParameters, renamePathParameters } from './spec-path-params.js';
import { dropUndeclaredRequired } from './spec-required.js';
import { emptyPart, type Json, type SpecOperation, type SpecPart } from './spec-types.js';

export { toOpenApi3 } from './spec-to-openapi3.js';

export interface CombinedSpecInput {
  /** Ready upstreams, in config order (the first one declaring an endpoint describes it). */
  upstreams: readonly DiscoveredUpstream[];
  builtinPaths: { healthcheck: string; metrics: string; spec: string };
  info?: { title?: string; version?: string };
  /** limits.maxUrlBytes: the router refuses templates whose every match is longer, and so does the doc. */
  maxUrlBytes?: number;
}

/**
 * One Swagger 2.0 document with every endpoint of every ready upstream, plus the built-in ones.
 *
 * - Paths are full paths (base path folded in); the document's basePath is "/".
 * - Paths are written the way Swagger 2.0 reads them (`/files/{+path}` -> `/files/{path}`,
 *   `/user/{id: [0-9]+}` -> `/user/{id}` with a `pattern`, `/img{.ext}` -> `/img{ext}`); an operation
 *   whose template says more than its path key keeps it in `x-template`. Path parameters the upstream
 *   left undeclared are declared as required strings.
 * - Two templates that come out as one path key up to parameter names (`/a/{id: [0-9]+}`, `/a/{id}`,
 *   `/a/{name}`) share the key of the first one seen, the others' path parameters renamed to it; with
 *   the same method, the one the router tries first (docs/reference/routing.md#specificity) is
 *   described, the others are named, with their upstreams, in its `x-collapsed-templates`.
 * - Names an upstream gives its definitions, parameters, responses and security schemes are prefixed
 *   with its namespace (`svc1_8081.User`), and its `$ref`s follow.
 * - Equivalent endpoints (same method, same template up to parameter names) are one operation: the
 *   first upstream's, with `x-upstreams` listing every upstream that serves it (they are load balanced).
 * - Built-in paths win over upstream endpoints; templates the router refuses are left out.
 * - operationIds are made unique by prefixing a clashing one with the upstream's namespace.
 */
export function buildCombinedSpec(input: CombinedSpecInput): object {
  return buildCombinedSpecWithNamespaces(input).doc;
}

export interface CombinedSpecOutput {
  doc: Json;
  /** The namespace each upstream's names got in the doc, by serviceLocation. */
  namespaces: Map<string, string>;
  /** Upstreams whose doc could not be converted at all: described from their route entries instead. */
  fromEntries: Array<{ upstream: string; reason: string }>;
}

export function buildCombinedSpecWithNamespaces(input: CombinedSpecInput): CombinedSpecOutput {
  const combined = new CombinedSpec(input.maxUrlBytes ?? DEFAULT_MAX_URL_BYTES);
  combined.add(builtinPart(input.builtinPaths), null);
  const allocator = new NamespaceAllocator([BUILTIN_NAMESPACE]);
  const namespaces = new Map<string, string>();
  const fromEntries: CombinedSpecOutput['fromEntries'] = [];
  for (const discovered of input.upstreams) {
    const location = discovered.upstream.serviceLocation;
    const namespace = allocator.allocate(location);
    namespaces.set(location, namespace);
    let part: SpecPart;
    try {
      part = partOf(discovered, namespace);
    } catch (err) {
      // One doc shaped like nothing the converters expect must not take /spec down for every upstream.
      fromEntries.push({ upstream: location, reason: err instanceof Error ? err.message : String(err) });
      part = partFromEntries(discovered);
    }
    combined.add(part, { location, namespace });
  }
  const doc = combined.document({
    title: input.info?.title ?? 'specgate',
    version: input.info?.version ?? '1.0.0',
    description: 'Every endpoint of every ready upstream behind this gateway, and the gateway\'s own endpoints.',
  });
  return { doc, namespaces, fromEntries };
}

/** What the router knows of an upstream's endpoints, as a static upstream's minimal operations. */
function partFromEntries({ upstream, entries }: DiscoveredUpstream): SpecPart {
  const endpoints = entries.map((e) => ({ method: e.method, path: e.template, consumes: [...e.consumes], produces: [...e.produces] }));
  return partFromStatic({ ...upstream, serviceType: 'static', endpoints });
}

function partOf(discovered: DiscoveredUpstream, namespace: string): SpecPart {
  const { upstream, doc } = discovered;
  if (upstream.serviceType === 'static') return partFromStatic(upstream);
  if (!doc) return emptyPart();
  const basePath = docBasePath(doc as Json, specUrl(upstream));
  return 'swagger' in doc ? partFromSwagger2(doc as Json, namespace, basePath) : partFromOpenapi3(doc as Json, namespace, basePath);
}

/** One operation of the combined doc, before operations that share a path key and method are settled. */
interface Described {
  key: string;
  method: string;
  template: ParsedTemplate;
  operation: Json;
}

class CombinedSpec {
  private readonly definitions: Json = {};
  private readonly parameters: Json = {};
  private readonly responses: Json = {};
  private readonly securityDefinitions: Json = {};
  private readonly tags = new Map<string, Json>();
  private readonly builtinTemplates = new Set<string>();
  /**
   * The first spelling of each path key with its parameter names erased (`/u/{}`): templates that
   * differ only in their names (`/u/{id}`, `/u/{name}`) or in what their variables match
   * (`/u/{id: [0-9]+}`) are one path to Swagger and OpenAPI, which allow no two such keys.
   */
  private readonly spellingByShape = new Map<string, SwaggerPath & { template: string; canonical: string }>();
  private readonly operationByKey = new Map<string, Described>();
  private readonly operationIds = new Set<string>();
  /** Per `namespace_id`, the suffix to try next: every one below it is taken, and stays taken. */
  private readonly nextSuffix = new Map<string, number>();

  constructor(private readonly maxUrlBytes: number) {}

  add(part: SpecPart, upstream: { location: string; namespace: string } | null): void {
    Object.assign(this.definitions, part.definitions);
    Object.assign(this.parameters, part.parameters);
    Object.assign(this.responses, part.responses);
    Object.assign(this.securityDefinitions, part.securityDefinitions);
    for (const tag of part.tags) if (typeof tag?.name === 'string' && !this.tags.has(tag.name)) this.tags.set(tag.name, tag);
    for (const operation of part.operations) this.addOperation(operation, upstream);
  }

  private addOperation({ path, method, operation }: SpecOperation, upstream: { location: string; namespace: string } | null): void {
    let template: ParsedTemplate;
    let own: SwaggerPath;
    try {
      template = parseTemplate(path);
      own = swaggerPath(path);
    } catch {
      return; // the router refuses this template (and reports it), so no client can reach it
    }
    if (shortestMatchLength(template) > this.maxUrlBytes) return; // refused by the router too (src/routing/table.ts)
    const canonical = template.canonical;
    if (upstream === null) this.builtinTemplates.add(canonical);
    else if (this.builtinTemplates.has(canonical)) return;

    const key = `${method} ${canonical}`;
    const equivalent = this.operationByKey.get(key);
    if (equivalent) {
      const upstreams: string[] = equivalent.operation['x-upstreams'];
      if (upstream && !upstreams.includes(upstream.location)) upstreams.push(upstream.location);
      return;
    }
    const shape = own.key.replace(/\{[^}]*\}/g, '{}');
    const spelling = this.spellingByShape.get(shape) ?? { ...own, template: path, canonical };
    // Another template of the same shape routes differently: this operation names its own.
    const routedBy = spelling.canonical === canonical ? spelling.template : path;
    const aligned = alignPathParameters(own, Array.isArray(operation.parameters) ? operation.parameters.filter(isObject) : []);
    if (!aligned) return;
    const described: Json = { ...operation, parameters: spelling.template === path ? aligned : renamePathParameters(own, spelling, aligned) };
    if (spelling.key !== `/${routedBy.replace(/^\/+|\/+$/g, '')}`) described['x-template'] = routedBy;
    if (typeof described.operationId === 'string') described.operationId = this.uniqueOperationId(described.operationId, upstream?.namespace);
    if (upstream) described['x-upstreams'] = [upstream.location];

    if (!this.spellingByShape.has(shape)) this.spellingByShape.set(shape, spelling);
    this.operationByKey.set(key, { key: spelling.key, method, template, operation: described });
  }

  /** Path items in the order their first operation came; per path key and method, the most specific template's. */
  private paths(): Json {
    const byPathAndMethod = new Map<string, Described[]>();
    for (const described of this.operationByKey.values()) {
      const slot = `${described.method} ${described.key}`;
      const list = byPathAndMethod.get(slot);
      if (list) list.push(described);
      else byPathAndMethod.set(slot, [described]);
    }
    const paths: Json = {};
    for (const list of byPathAndMethod.values()) {
      const [chosen, ...collapsed] = list.sort((a, b) => compareSpecificity(a.template, b.template));
      const operation = collapsed.length === 0 ? chosen!.operation : { ...chosen!.operation };
      if (collapsed.length > 0) {
        operation['x-collapsed-templates'] = collapsed.map((c) => ({ template: c.template.raw, upstreams: [...(c.operation['x-upstreams'] ?? [])] }));
      }
      (paths[chosen!.key] ??= {})[chosen!.method] = operation;
    }
    return paths;
  }

  private uniqueOperationId(id: string, namespace = BUILTIN_NAMESPACE): string {
    let unique = id;
    if (this.operationIds.has(unique)) unique = `${namespace}_${id}`;
    if (this.operationIds.has(unique)) {
      const prefix = unique;
      let n = this.nextSuffix.get(prefix) ?? 2;
      while (this.operationIds.has(`${prefix}_${n}`)) n++;
      unique = `${prefix}_${n}`;
      this.nextSuffix.set(prefix, n + 1);
    }
    this.operationIds.add(unique);
    return unique;
  }

  document(info: Json): Json {
    const doc: Json = { swagger: '2.0', info, basePath: '/', paths: this.paths(), definitions: this.definitions };
    if (Object.keys(this.parameters).length > 0) doc.parameters = this.parameters;
    if (Object.keys(this.responses).length > 0) doc.responses = this.responses;
    if (Object.keys(this.securityDefinitions).length > 0) doc.securityDefinitions = this.securityDefinitions;
    if (this.tags.size > 0) doc.tags = [...this.tags.values()];
    for (const schema of Object.values<Json>(this.definitions)) dropUndeclaredRequired(schema, doc);
    for (const pathItem of Object.values<Json>(doc.paths)) {
      for (const operation of Object.values<Json>(pathItem)) {
        for (const parameter of operation.parameters ?? []) if (parameter.in === 'body' && parameter.schema) dropUndeclaredRequired(parameter.schema, doc);
      }
    }
    return doc;
  }
}
