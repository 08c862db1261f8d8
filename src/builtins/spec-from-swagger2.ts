import { joinTemplate } from '../discovery/base-path.js';
import { isObject } from '../discovery/objection.js';
import { MAX_INLINE_DEPTH, mapRefs, namespacedRef, resolveLocalRef, unresolved } from './spec-refs.js';
import { namespacedSecurity } from './spec-security.js';
import { SWAGGER2_METHODS, emptyPart, type Json, type SpecPart } from './spec-types.js';

const SECTIONS = ['definitions', 'parameters', 'responses'] as const;

/** A Swagger 2.0 upstream's operations and named objects, namespaced, with every `$ref` following. */
export function partFromSwagger2(doc: Json, namespace: string, basePath: string): SpecPart {
  const part = emptyPart();
  const copy = (value: unknown) => mapRefs(value, mapRef);
  const mapRef = (ref: string, depth: number): unknown => {
    for (const section of SECTIONS) {
      const renamed = namespacedRef(ref, `#/${section}/`, section, namespace);
      if (renamed) return resolveLocalRef(doc, ref) === undefined ? unresolved(ref) : { $ref: renamed };
    }
    const target = resolveLocalRef(doc, ref);
    if (target === undefined || depth >= MAX_INLINE_DEPTH) return unresolved(ref);
    return mapRefs(target, mapRef, depth + 1);
  };

  for (const section of SECTIONS) {
    for (const [name, value] of Object.entries<unknown>(doc[section] ?? {})) part[section][`${namespace}.${name}`] = copy(value);
  }
  describeUnresolvedResponses(part.responses);
  for (const [name, scheme] of Object.entries<unknown>(doc.securityDefinitions ?? {})) {
    part.securityDefinitions[`${namespace}.${name}`] = copy(scheme);
  }
  part.tags = Array.isArray(doc.tags) ? (copy(doc.tags) as Json[]) : [];

  for (const [pathKey, rawItem] of Object.entries<Json>(doc.paths ?? {})) {
    if (!pathKey.startsWith('/')) continue;
    const pathItem = (rawItem?.$ref ? resolveLocalRef(doc, rawItem.$ref) : rawItem) as Json | undefined;
    if (!isObject(pathItem)) continue;
    for (const method of SWAGGER2_METHODS) {
      const source: unknown = pathItem[method];
      if (!isObject(source)) continue;
      const operation = copy(source) as Json;
      describeUnresolvedResponses(operation.responses);
      operation.parameters = mergedParameters(doc, pathItem.parameters, source.parameters).map((p) =>
        // Path parameters may be renamed later, so they are inlined rather than shared through a $ref.
        p.resolved.in === 'path' ? copy(p.resolved) : copy(p.raw),
      );
      const consumes = source.consumes ?? doc.consumes;
      const produces = source.produces ?? doc.produces;
      if (Array.isArray(consumes)) operation.consumes = [...consumes];
      else delete operation.consumes;
      if (Array.isArray(produces)) operation.produces = [...produces];
      else delete operation.produces;
      const security = namespacedSecurity(source.security ?? doc.security, namespace, part.securityDefinitions);
      if (security) operation.security = security;
      else delete operation.security;
      delete operation.schemes; // the gateway's schemes are what clients use
      part.operations.push({ path: joinTemplate(basePath, pathKey), method, operation });
    }
  }
  return part;
}

/** Operation parameters, plus path-item ones the operation does not override (same name and place). */
function mergedParameters(doc: Json, pathLevel: unknown, operationLevel: unknown): Array<{ raw: Json; resolved: Json }> {
  const withTargets = (list: unknown) =>
    (Array.isArray(list) ? list.filter(isObject) : []).map((raw: Json) => ({
      raw,
      resolved: ((raw.$ref ? resolveLocalRef(doc, raw.$ref) : raw) ?? {}) as Json,
    }));
  const own = withTargets(operationLevel);
  const inherited = withTargets(pathLevel).filter(
    (p) => !own.some((o) => o.resolved.name === p.resolved.name && o.resolved.in === p.resolved.in),
  );
  return [...own, ...inherited].filter((p) => p.resolved.name !== undefined);
}

/** A response that was a `$ref` to nothing still needs the description Swagger 2.0 requires of a response. */
function describeUnresolvedResponses(responses: unknown): void {
  if (typeof responses !== 'object' || responses === null) return;
  for (const response of Object.values<Json>(responses as Json)) {
    const ref = response?.['x-unresolved-ref'];
    if (ref !== undefined && response.description === undefined) response.description = `Response of the upstream (its $ref "${ref}" does not resolve)`;
  }
}
