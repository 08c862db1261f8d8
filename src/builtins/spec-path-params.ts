import { parameterIdentifier, type SwaggerPath } from '../discovery/swagger-path.js';
import type { Json } from './spec-types.js';

/**
 * Swagger 2.0 wants one required path parameter named exactly as each `{…}` of the path key. Upstreams
 * name them by identifier (`path` for `{+path}`), as written (`+path`), or not at all: path parameters
 * are renamed to their placeholder, missing ones are added as strings, and ones with no placeholder are
 * dropped. A regex segment's regex becomes the string parameter's `pattern` when it stays within one
 * segment (one that may span "/" has no Swagger 2.0 form; `x-template` keeps it). Returns undefined when
 * the path repeats a placeholder, which Swagger 2.0 cannot describe.
 */
export function alignPathParameters(path: SwaggerPath, parameters: readonly Json[]): Json[] | undefined {
  const names = path.params.map((p) => p.name);
  if (new Set(names).size !== names.length) return undefined;
  const pathParams = parameters.filter((p) => p.in === 'path');
  const others = parameters.filter((p) => p.in !== 'path');
  const used = new Set<Json>();
  const aligned = path.params.map(({ name, pattern }) => {
    const found =
      pathParams.find((p) => !used.has(p) && p.name === name) ??
      pathParams.find((p) => !used.has(p) && parameterIdentifier(String(p.name)) === name);
    const parameter: Json = found ? { ...found, name, required: true } : { name, in: 'path', required: true, type: 'string' };
    if (found) used.add(found);
    if (pattern !== undefined && parameter.type === 'string' && parameter.pattern === undefined) parameter.pattern = pattern;
    return parameter;
  });
  return [...aligned, ...others];
}

/** Renames path parameters from the placeholders of `from` to those of an equivalent path `to`, by position. */
export function renamePathParameters(from: SwaggerPath, to: SwaggerPath, parameters: readonly Json[]): Json[] {
  const oldNames = from.params.map((p) => p.name);
  return parameters.map((p) => {
    const index = p.in === 'path' ? oldNames.indexOf(String(p.name)) : -1;
    const renamed = index === -1 ? undefined : to.params[index]?.name;
    return renamed === undefined ? p : { ...p, name: renamed };
  });
}
