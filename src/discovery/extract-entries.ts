import type { StaticEndpointConfig, UpstreamConfig } from '../config/types.js';
import type { RouteEntry } from '../routing/types.js';
import { joinTemplate } from './base-path.js';
import { isObject, methodsOf, type Objection } from './objection.js';

type Doc = Record<string, any>;

export function entriesFromStatic(upstream: UpstreamConfig): RouteEntry[] {
  return (upstream.endpoints ?? []).map((endpoint: StaticEndpointConfig) => ({
    method: endpoint.method.toUpperCase(),
    template: endpoint.path,
    upstream: upstream.serviceLocation,
    consumes: [...(endpoint.consumes ?? [])],
    produces: [...(endpoint.produces ?? [])],
    disabledMiddleware: [...(endpoint['x-disabled-middleware'] ?? [])],
    disabledListeners: [...(endpoint['x-disabled-listeners'] ?? [])],
  }));
}

/**
 * One entry per operation of a dereferenced Swagger 2.0 or OpenAPI 3.x doc, whatever a validator thinks
 * of it: templates are the routing compiler's to judge. What cannot be read (a media type list that is
 * not a list of strings, say) is taken as absent and added to `objections`.
 */
export function entriesFromDoc(doc: Doc, upstream: string, basePath: string, objections: Objection[] = []): RouteEntry[] {
  const isSwagger2 = doc.swagger !== undefined;
  const entries: RouteEntry[] = [];
  for (const [pathKey, pathItem] of Object.entries<unknown>(isObject(doc.paths) ? doc.paths : {})) {
    if (!pathKey.startsWith('/') || !isObject(pathItem)) continue; // `x-` extensions of the Paths object
    const template = joinTemplate(basePath, pathKey);
    for (const method of methodsOf(isSwagger2 ? 'swagger2' : 'openapi3')) {
      const operation: unknown = pathItem[method];
      if (!isObject(operation)) continue;
      const problem = (message: string) => objections.push({ pointer: ['paths', pathKey, method], message });
      entries.push({
        method: method.toUpperCase(),
        template,
        upstream,
        consumes: isSwagger2 ? mediaTypes(operation, doc, 'consumes', problem) : requestMediaTypes(operation),
        produces: isSwagger2 ? mediaTypes(operation, doc, 'produces', problem) : responseMediaTypes(operation),
        disabledMiddleware: idList(operation, pathItem, 'x-disabled-middleware', problem),
        disabledListeners: idList(operation, pathItem, 'x-disabled-listeners', problem),
      });
    }
  }
  return entries;
}

/** Swagger 2.0: the operation's list overrides the doc's. */
function mediaTypes(operation: Doc, doc: Doc, key: 'consumes' | 'produces', problem: (reason: string) => void): string[] {
  const value = operation[key] ?? doc[key];
  if (value === undefined || value === null) return [];
  if (Array.isArray(value) && value.every((type) => typeof type === 'string')) return [...value];
  problem(`${key} must be a list of media types (got ${JSON.stringify(value)}); taken as any`);
  return [];
}

function requestMediaTypes(operation: Doc): string[] {
  const content = operation.requestBody?.content;
  return isObject(content) ? Object.keys(content) : [];
}

function responseMediaTypes(operation: Doc): string[] {
  const types = new Set<string>();
  for (const response of Object.values<unknown>(isObject(operation.responses) ? operation.responses : {})) {
    const content = isObject(response) ? response.content : undefined;
    if (isObject(content)) for (const type of Object.keys(content)) types.add(type);
  }
  return [...types];
}

/** The operation's list wins over the path item's; a lone string is taken as a list of one. */
function idList(operation: Doc, pathItem: Doc, key: string, problem: (reason: string) => void): string[] {
  const value = operation[key] ?? pathItem[key];
  if (value === undefined || value === null) return [];
  if (typeof value === 'string') return [value];
  if (Array.isArray(value) && value.every((id) => typeof id === 'string')) return [...value];
  problem(`${key} must be a list of ids (got ${JSON.stringify(value)}); ignored`);
  return [];
}
