import { createRequire } from 'node:module';
import { isObject, methodsOf, type DocKind, type Objection } from './objection.js';
import { parameterIdentifier, swaggerPath, type SwaggerPath } from './swagger-path.js';

// swagger-parser's checks of what the schema cannot say (path parameters against placeholders, one body,
// response codes, types...). It stops at the first objection, so it is run on one operation at a time.
const require = createRequire(import.meta.url);
const validateSpec = require('@apidevtools/swagger-parser/lib/validators/spec.js') as (api: object) => void;

type Json = Record<string, any>;

/**
 * swagger-parser's spec objections, one operation at a time, on a dereferenced doc. The path key is
 * first written the Swagger 2.0 way (`{+path}` -> `{path}`) and declared path parameters are taken by
 * their bare identifier, so a doc that uses every segment form (docs/reference/routing.md#segment-forms), declared by identifier, has
 * nothing to object to. OpenAPI 3 operations are checked for their path parameters only (swagger-parser
 * checks nothing else of OpenAPI 3 beyond its schema). A path key the router refuses is not checked
 * here: the routing compiler reports it, naming the upstream.
 */
export function specObjections(doc: Json, kind: DocKind): Objection[] {
  const objections: Objection[] = [];
  const operationIds = new Map<string, string>();
  for (const [pathKey, pathItem] of Object.entries<unknown>(isObject(doc.paths) ? doc.paths : {})) {
    if (!pathKey.startsWith('/') || !isObject(pathItem)) continue;
    let form: SwaggerPath;
    try {
      form = swaggerPath(pathKey);
    } catch {
      continue;
    }
    for (const method of methodsOf(kind)) {
      const operation: unknown = pathItem[method];
      if (!isObject(operation)) continue;
      const pointer = ['paths', pathKey, method];
      const api = kind === 'swagger2' ? swagger2Operation(form.key, method, pathItem, operation) : pathParametersOnly(form.key, method, pathItem, operation);
      try {
        validateSpec(api);
      } catch (error) {
        objections.push({ pointer, message: specReason(String((error as Error).message ?? error), form.key, method) });
      }
      if (typeof operation.operationId === 'string') {
        const first = operationIds.get(operation.operationId);
        if (first === undefined) operationIds.set(operation.operationId, `${method.toUpperCase()} ${pathKey}`);
        else objections.push({ pointer, message: `operationId "${operation.operationId}" is already used by ${first}` });
      }
    }
  }
  return objections;
}

/** The operation alone in a doc of its own (operationIds are compared across operations above). */
function swagger2Operation(key: string, method: string, pathItem: Json, operation: Json): Json {
  const { operationId: _id, ...rest } = operation;
  return {
    swagger: '2.0',
    paths: { [key]: { parameters: usable(pathItem.parameters), [method]: { ...rest, parameters: usable(operation.parameters) } } },
  };
}

/** OpenAPI 3 path parameters as minimal Swagger 2.0 ones: what the placeholder check needs. */
function pathParametersOnly(key: string, method: string, pathItem: Json, operation: Json): Json {
  const stubs = (list: unknown) =>
    usable(list)
      .filter((p) => p.in === 'path')
      .map((p) => ({ name: p.name, in: 'path', required: p.required, type: 'string' }));
  return { paths: { [key]: { parameters: stubs(pathItem.parameters), [method]: { parameters: stubs(operation.parameters) } } } };
}

/**
 * Parameter objects, path ones named by their identifier. A `$ref` still standing is one that does not
 * resolve or points outside the doc: that is an objection of its own already.
 */
function usable(list: unknown): Json[] {
  if (!Array.isArray(list)) return [];
  return list
    .filter((p): p is Json => isObject(p) && typeof p.$ref !== 'string')
    .map((p) => (p.in === 'path' && typeof p.name === 'string' ? { ...p, name: parameterIdentifier(p.name) } : p));
}

/** swagger-parser's message, less its prefix and the operation's own pointer (the objection carries it). */
function specReason(message: string, key: string, method: string): string {
  const text = message.replace(/^(SyntaxError: )?Validation failed\.\s*/, '');
  const missing = /is missing path parameter\(s\) for (.+)$/.exec(text);
  if (missing) return `path parameter ${missing[1]!.split(',').join(', ')} ${missing[1]!.includes(',') ? 'are' : 'is'} not declared`;
  const operation = `/paths${key}/${method}`;
  return text.split(` at ${operation}`).join('').split(`${operation}/`).join('').split(`${operation} `).join('').split(`/paths${key} `).join('');
}
