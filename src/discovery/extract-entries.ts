import type { StaticEndpointConfig, UpstreamConfig } from '../config/types.js';
import type { RouteEntry } from '../routing/types.js';
import { joinTemplate } from './base-path.js';

const SWAGGER2_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch'] as const;
const OPENAPI3_METHODS = [...SWAGGER2_METHODS, 'trace'] as const;

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

/** One entry per operation of a validated, dereferenced Swagger 2.0 or OpenAPI 3.x doc. */
export function entriesFromDoc(doc: Doc, upstream: string, basePath: string): RouteEntry[] {
  const isSwagger2 = typeof doc.swagger === 'string';
  const methods = isSwagger2 ? SWAGGER2_METHODS : OPENAPI3_METHODS;
  const entries: RouteEntry[] = [];
  for (const [pathKey, pathItem] of Object.entries<Doc>(doc.paths ?? {})) {
    if (!pathKey.startsWith('/') || !pathItem) continue; // `x-` extensions of the Paths object
    for (const method of methods) {
      const operation: Doc | undefined = pathItem[method];
      if (!operation) continue;
      const where = `${method.toUpperCase()} ${pathKey}`;
      entries.push({
        method: method.toUpperCase(),
        template: joinTemplate(basePath, pathKey),
        upstream,
        consumes: isSwagger2 ? [...(operation.consumes ?? doc.consumes ?? [])] : requestMediaTypes(operation),
        produces: isSwagger2 ? [...(operation.produces ?? doc.produces ?? [])] : responseMediaTypes(operation),
        disabledMiddleware: idList(operation, pathItem, 'x-disabled-middleware', where),
        disabledListeners: idList(operation, pathItem, 'x-disabled-listeners', where),
      });
    }
  }
  return entries;
}

function requestMediaTypes(operation: Doc): string[] {
  return Object.keys(operation.requestBody?.content ?? {});
}

function responseMediaTypes(operation: Doc): string[] {
  const types = new Set<string>();
  for (const response of Object.values<Doc>(operation.responses ?? {})) {
    for (const type of Object.keys(response?.content ?? {})) types.add(type);
  }
  return [...types];
}

/** The operation's list wins over the path item's; a lone string is taken as a list of one. */
function idList(operation: Doc, pathItem: Doc, key: string, where: string): string[] {
  const value = operation[key] ?? pathItem[key];
  if (value === undefined || value === null) return [];
  if (typeof value === 'string') return [value];
  if (Array.isArray(value) && value.every((id) => typeof id === 'string')) return [...value];
  throw new Error(`${where}: ${key} must be a list of ids (got ${JSON.stringify(value)})`);
}
