import { resolveLocalRef } from './spec-refs.js';
import type { Json } from './spec-types.js';

/**
 * OpenAPI 3 lets `required` name a property the schema does not declare; Swagger 2.0 validators refuse
 * that. Drops such names from a top-level schema, unless some part of it could not be followed.
 */
export function dropUndeclaredRequired(schema: Json, doc: Json): void {
  if (typeof schema !== 'object' || schema === null || !Array.isArray(schema.required)) return;
  const declared = declaredProperties(schema, doc, new Set());
  if (!declared) return;
  const kept = schema.required.filter((name: string) => declared.has(name));
  if (kept.length > 0) schema.required = kept;
  else delete schema.required;
}

function declaredProperties(schema: Json | undefined, doc: Json, visiting: Set<Json>): Set<string> | undefined {
  if (typeof schema !== 'object' || schema === null || visiting.has(schema)) return new Set();
  if (typeof schema.$ref === 'string') {
    return declaredProperties(resolveLocalRef(doc, schema.$ref) as Json | undefined, doc, visiting);
  }
  if (schema['x-unresolved-ref']) return undefined;
  visiting.add(schema);
  const names = new Set(Object.keys(schema.properties ?? {}));
  for (const member of Array.isArray(schema.allOf) ? schema.allOf : []) {
    const inherited = declaredProperties(member, doc, visiting);
    if (!inherited) return undefined;
    for (const name of inherited) names.add(name);
  }
  return names;
}
