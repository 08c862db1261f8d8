import { swaggerPlaceholders, type Json } from './spec-types.js';

/**
 * Swagger 2.0 wants one required path parameter named exactly as each `{…}` of the path. Upstreams
 * name them by identifier (`path` for `{+path}`), so path parameters are renamed to their placeholder,
 * missing ones are added as strings, and ones with no placeholder are dropped. Returns undefined when
 * the path repeats a placeholder, which Swagger 2.0 cannot describe.
 */
export function alignPathParameters(path: string, parameters: readonly Json[]): Json[] | undefined {
  const placeholders = swaggerPlaceholders(path);
  if (new Set(placeholders).size !== placeholders.length) return undefined;
  const pathParams = parameters.filter((p) => p.in === 'path');
  const others = parameters.filter((p) => p.in !== 'path');
  const used = new Set<Json>();
  const aligned = placeholders.map((placeholder) => {
    const found =
      pathParams.find((p) => !used.has(p) && p.name === placeholder) ??
      pathParams.find((p) => !used.has(p) && identifier(String(p.name)) === identifier(placeholder));
    if (!found) return { name: placeholder, in: 'path', required: true, type: 'string' };
    used.add(found);
    return { ...found, name: placeholder, required: true };
  });
  return [...aligned, ...others];
}

/** Renames path parameters from the placeholders of `from` to those of an equivalent path `to`, by position. */
export function renamePathParameters(from: string, to: string, parameters: readonly Json[]): Json[] {
  const oldNames = swaggerPlaceholders(from);
  const newNames = swaggerPlaceholders(to);
  return parameters.map((p) => {
    const index = p.in === 'path' ? oldNames.indexOf(String(p.name)) : -1;
    return index === -1 || newNames[index] === undefined ? p : { ...p, name: newNames[index] };
  });
}

/** `+path` -> `path`, `.format` -> `format`, `id: [0-9]+` -> `id`. */
function identifier(placeholder: string): string {
  return placeholder.replace(/^[+.?#;&/]/, '').split(':')[0].trim();
}
