import { docBasePath } from '../discovery/base-path.js';
import { specUrl } from '../discovery/discover.js';
import type { DiscoveredUpstream } from '../discovery/types.js';
import { parseTemplate } from '../routing/template.js';
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
}

/**
 * One Swagger 2.0 document with every endpoint of every ready upstream, plus the built-in ones.
 *
 * - Paths are full paths (base path folded in); the document's basePath is "/".
 * - Names an upstream gives its definitions, parameters, responses and security schemes are prefixed
 *   with its namespace (`svc1_8081.User`), and its `$ref`s follow.
 * - Equivalent endpoints (same method, same template up to parameter names) are one operation: the
 *   first upstream's, with `x-upstreams` listing every upstream that serves it (they are load balanced).
 * - Built-in paths win over upstream endpoints; templates the router refuses are left out.
 * - operationIds are made unique by prefixing a clashing one with the upstream's namespace.
 */
export function buildCombinedSpec(input: CombinedSpecInput): object {
  const combined = new CombinedSpec();
  combined.add(builtinPart(input.builtinPaths), null);
  const namespaces = new NamespaceAllocator([BUILTIN_NAMESPACE]);
  for (const discovered of input.upstreams) {
    const namespace = namespaces.allocate(discovered.upstream.serviceLocation);
    combined.add(partOf(discovered, namespace), { location: discovered.upstream.serviceLocation, namespace });
  }
  return combined.document({
    title: input.info?.title ?? 'specgate',
    version: input.info?.version ?? '1.0.0',
    description: 'Every endpoint of every ready upstream behind this gateway, and the gateway\'s own endpoints.',
  });
}

function partOf(discovered: DiscoveredUpstream, namespace: string): SpecPart {
  const { upstream, doc } = discovered;
  if (upstream.serviceType === 'static') return partFromStatic(upstream);
  if (!doc) return emptyPart();
  const basePath = docBasePath(doc as Json, specUrl(upstream));
  return 'swagger' in doc ? partFromSwagger2(doc as Json, namespace, basePath) : partFromOpenapi3(doc as Json, namespace, basePath);
}

class CombinedSpec {
  private readonly paths: Json = {};
  private readonly definitions: Json = {};
  private readonly parameters: Json = {};
  private readonly responses: Json = {};
  private readonly securityDefinitions: Json = {};
  private readonly tags = new Map<string, Json>();
  private readonly builtinTemplates = new Set<string>();
  private readonly pathByCanonical = new Map<string, string>();
  private readonly operationByKey = new Map<string, Json>();
  private readonly operationIds = new Set<string>();

  add(part: SpecPart, upstream: { location: string; namespace: string } | null): void {
    Object.assign(this.definitions, part.definitions);
    Object.assign(this.parameters, part.parameters);
    Object.assign(this.responses, part.responses);
    Object.assign(this.securityDefinitions, part.securityDefinitions);
    for (const tag of part.tags) if (typeof tag?.name === 'string' && !this.tags.has(tag.name)) this.tags.set(tag.name, tag);
    for (const operation of part.operations) this.addOperation(operation, upstream);
  }

  private addOperation({ path, method, operation }: SpecOperation, upstream: { location: string; namespace: string } | null): void {
    let canonical: string;
    try {
      canonical = parseTemplate(path).canonical;
    } catch {
      return; // the router refuses this template (and reports it), so no client can reach it
    }
    if (upstream === null) this.builtinTemplates.add(canonical);
    else if (this.builtinTemplates.has(canonical)) return;

    const key = `${method} ${canonical}`;
    const equivalent = this.operationByKey.get(key);
    if (equivalent) {
      if (upstream && !equivalent['x-upstreams'].includes(upstream.location)) equivalent['x-upstreams'].push(upstream.location);
      return;
    }
    const pathKey = this.pathByCanonical.get(canonical) ?? path;
    const aligned = alignPathParameters(path, operation.parameters ?? []);
    if (!aligned) return;
    const described: Json = { ...operation, parameters: pathKey === path ? aligned : renamePathParameters(path, pathKey, aligned) };
    if (typeof described.operationId === 'string') described.operationId = this.uniqueOperationId(described.operationId, upstream?.namespace);
    if (upstream) described['x-upstreams'] = [upstream.location];

    this.pathByCanonical.set(canonical, pathKey);
    this.operationByKey.set(key, described);
    (this.paths[pathKey] ??= {})[method] = described;
  }

  private uniqueOperationId(id: string, namespace = BUILTIN_NAMESPACE): string {
    let unique = id;
    if (this.operationIds.has(unique)) unique = `${namespace}_${id}`;
    for (let n = 2; this.operationIds.has(unique); n++) unique = `${namespace}_${id}_${n}`;
    this.operationIds.add(unique);
    return unique;
  }

  document(info: Json): Json {
    const doc: Json = { swagger: '2.0', info, basePath: '/', paths: this.paths, definitions: this.definitions };
    if (Object.keys(this.parameters).length > 0) doc.parameters = this.parameters;
    if (Object.keys(this.responses).length > 0) doc.responses = this.responses;
    if (Object.keys(this.securityDefinitions).length > 0) doc.securityDefinitions = this.securityDefinitions;
    if (this.tags.size > 0) doc.tags = [...this.tags.values()];
    for (const schema of Object.values<Json>(this.definitions)) dropUndeclaredRequired(schema, doc);
    for (const pathItem of Object.values<Json>(this.paths)) {
      for (const operation of Object.values<Json>(pathItem)) {
        for (const parameter of operation.parameters ?? []) if (parameter.in === 'body' && parameter.schema) dropUndeclaredRequired(parameter.schema, doc);
      }
    }
    return doc;
  }
}
