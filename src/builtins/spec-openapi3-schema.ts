import { MAX_INLINE_DEPTH, namespacedRef, resolveLocalRef, unresolved } from './spec-refs.js';
import type { Json } from './spec-types.js';

/** Schema keywords Swagger 2.0 shares with OpenAPI 3, copied as they are. */
const SHARED_KEYWORDS = [
  'title', 'description', 'default', 'multipleOf', 'maximum', 'minimum', 'maxLength', 'minLength', 'pattern',
  'maxItems', 'minItems', 'uniqueItems', 'maxProperties', 'minProperties', 'enum', 'format', 'readOnly',
  'example', 'xml', 'externalDocs',
] as const;

/**
 * Converts OpenAPI 3.x schemas to Swagger 2.0 ones. What 2.0 cannot say is left out: `oneOf`, `anyOf`,
 * `not`, `writeOnly`, `deprecated`, `examples`, several types at once. `nullable` (and a "null" type)
 * becomes the common `x-nullable` extension; `const` becomes a one-value `enum`; numeric
 * `exclusiveMinimum`/`exclusiveMaximum` (3.1) become the 2.0 bound + flag.
 */
export class Openapi3SchemaConverter {
  constructor(
    private readonly doc: Json,
    private readonly namespace: string,
  ) {}

  convert(schema: unknown, depth = 0): Json {
    if (typeof schema !== 'object' || schema === null) return {};
    const source = schema as Json;
    if (typeof source.$ref === 'string') return this.convertRef(source.$ref, depth);

    const out: Json = {};
    for (const key of SHARED_KEYWORDS) if (source[key] !== undefined) out[key] = source[key];
    for (const key of Object.keys(source)) if (key.startsWith('x-')) out[key] = source[key];
    if (source.const !== undefined && out.enum === undefined) out.enum = [source.const];
    convertBound(source, out, 'exclusiveMaximum', 'maximum');
    convertBound(source, out, 'exclusiveMinimum', 'minimum');

    const { type, nullable } = singleType(source.type);
    if (type) out.type = type;
    if (nullable || source.nullable === true) out['x-nullable'] = true;
    if (Array.isArray(source.required) && source.required.length > 0) out.required = [...source.required];
    if (source.properties && typeof source.properties === 'object') {
      out.properties = Object.fromEntries(Object.entries(source.properties).map(([name, s]) => [name, this.convert(s, depth)]));
    }
    if (typeof source.additionalProperties === 'boolean') out.additionalProperties = source.additionalProperties;
    else if (source.additionalProperties) out.additionalProperties = this.convert(source.additionalProperties, depth);
    if (Array.isArray(source.allOf)) out.allOf = source.allOf.map((s: unknown) => this.convert(s, depth));
    if (source.items && !Array.isArray(source.items)) out.items = this.convert(source.items, depth);
    if (out.type === 'array' && !out.items) out.items = {};
    if (typeof source.discriminator?.propertyName === 'string') out.discriminator = source.discriminator.propertyName;
    return out;
  }

  /** Component schemas stay references (now into `definitions`); any other local target is inlined. */
  private convertRef(ref: string, depth: number): Json {
    const target = resolveLocalRef(this.doc, ref);
    const renamed = namespacedRef(ref, '#/components/schemas/', 'definitions', this.namespace);
    if (renamed && target !== undefined) return { $ref: renamed };
    if (target === undefined || depth >= MAX_INLINE_DEPTH) return unresolved(ref);
    return this.convert(target, depth + 1);
  }

  /** Follows `$ref`s (any local target) to the schema object itself, for decisions about its shape. */
  resolve(schema: unknown, depth = 0): Json | undefined {
    if (typeof schema !== 'object' || schema === null) return undefined;
    const source = schema as Json;
    if (typeof source.$ref !== 'string') return source;
    if (depth >= MAX_INLINE_DEPTH) return undefined;
    return this.resolve(resolveLocalRef(this.doc, source.$ref), depth + 1);
  }
}

function singleType(type: unknown): { type?: string; nullable: boolean } {
  if (typeof type === 'string') return type === 'null' ? { nullable: true } : { type, nullable: false };
  if (!Array.isArray(type)) return { nullable: false };
  const nonNull = type.filter((t) => t !== 'null');
  return { type: nonNull.length === 1 ? nonNull[0] : undefined, nullable: nonNull.length < type.length };
}

function convertBound(source: Json, out: Json, exclusiveKey: string, boundKey: string): void {
  const value = source[exclusiveKey];
  if (typeof value === 'boolean') out[exclusiveKey] = value;
  else if (typeof value === 'number') {
    out[boundKey] = value;
    out[exclusiveKey] = true;
  }
}
