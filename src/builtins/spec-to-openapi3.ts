import { MAX_INLINE_DEPTH, mapRefs, resolveLocalRef } from './spec-refs.js';
import { SWAGGER2_METHODS, type Json } from './spec-types.js';

/** Media type assumed when an operation names none (Swagger 2.0 tools assume JSON too). */
const DEFAULT_MEDIA_TYPE = 'application/json';
const NON_BODY_KEYWORDS = [
  'type', 'format', 'default', 'maximum', 'exclusiveMaximum', 'minimum', 'exclusiveMinimum', 'maxLength', 'minLength',
  'pattern', 'maxItems', 'minItems', 'uniqueItems', 'enum', 'multipleOf',
] as const;
const OPERATION_KEYS = ['tags', 'summary', 'description', 'externalDocs', 'operationId', 'deprecated', 'security'] as const;

/**
 * The combined Swagger 2.0 doc as an OpenAPI 3.0 one (`?format=openapi3`). Definitions become
 * components/schemas; shared parameters and responses are inlined (2.0 ones carry no media types of
 * their own); body and formData parameters become a requestBody with one entry per consumed type.
 */
export function toOpenApi3(swagger2: object): object {
  const doc = swagger2 as Json;
  const convertSchema = (schema: unknown): Json => mapRefs(schema, (ref) => ({ $ref: schemaRef(ref) })) as Json;
  const schemas: Json = {};
  for (const [name, schema] of Object.entries<Json>(doc.definitions ?? {})) schemas[name] = toSchema3(convertSchema(schema));

  const paths: Json = {};
  for (const [path, pathItem] of Object.entries<Json>(doc.paths ?? {})) {
    const item: Json = {};
    for (const method of SWAGGER2_METHODS) {
      if (pathItem[method]) item[method] = convertOperation(doc, pathItem[method], convertSchema);
    }
    paths[path] = item;
  }

  const out: Json = { openapi: '3.0.3', info: doc.info, servers: [{ url: doc.basePath ?? '/' }], paths, components: { schemas } };
  const securitySchemes = convertSecurityDefinitions(doc.securityDefinitions ?? {});
  if (Object.keys(securitySchemes).length > 0) out.components.securitySchemes = securitySchemes;
  if (doc.tags) out.tags = doc.tags;
  return out;
}

function schemaRef(ref: string): string {
  return ref.startsWith('#/definitions/') ? `#/components/schemas/${ref.slice('#/definitions/'.length)}` : ref;
}

function convertOperation(doc: Json, source: Json, convertSchema: (schema: unknown) => Json): Json {
  const operation: Json = {};
  for (const key of OPERATION_KEYS) if (source[key] !== undefined) operation[key] = source[key];
  for (const key of Object.keys(source)) if (key.startsWith('x-')) operation[key] = source[key];
  const consumes: string[] = source.consumes?.length ? source.consumes : [DEFAULT_MEDIA_TYPE];
  const produces: string[] = source.produces?.length ? source.produces : [DEFAULT_MEDIA_TYPE];

  const parameters = (source.parameters ?? []).map((p: Json) => deref(doc, p));
  operation.parameters = parameters
    .filter((p: Json) => p.in !== 'body' && p.in !== 'formData')
    .map((p: Json) => convertParameter(p));

  const body = parameters.find((p: Json) => p.in === 'body');
  const form = parameters.filter((p: Json) => p.in === 'formData');
  if (body) {
    const schema = toSchema3(convertSchema(body.schema ?? {}));
    operation.requestBody = {
      required: body.required === true,
      content: Object.fromEntries(consumes.map((type) => [type, { schema }])),
      ...(body.description !== undefined ? { description: body.description } : {}),
    };
  } else if (form.length > 0) {
    const formTypes = consumes.filter((type) => /form-data|x-www-form-urlencoded/.test(type));
    const schema: Json = { type: 'object', properties: Object.fromEntries(form.map((p: Json) => [p.name, formPropertySchema(p)])) };
    const required = form.filter((p: Json) => p.required).map((p: Json) => p.name);
    if (required.length > 0) schema.required = required;
    operation.requestBody = { content: Object.fromEntries((formTypes.length ? formTypes : ['multipart/form-data']).map((type) => [type, { schema }])) };
  }

  operation.responses = {};
  for (const [code, raw] of Object.entries<Json>(source.responses ?? {})) {
    const response = deref(doc, raw);
    const converted: Json = { description: response.description ?? '' };
    if (response.schema) {
      const schema = toSchema3(convertSchema(response.schema));
      converted.content = Object.fromEntries(produces.map((type) => [type, { schema }]));
    }
    if (response.headers) {
      converted.headers = Object.fromEntries(
        Object.entries<Json>(response.headers).map(([name, header]) => [name, { description: header.description, schema: primitiveSchema(header) }]),
      );
    }
    operation.responses[code] = converted;
  }
  return operation;
}

function convertParameter(p: Json): Json {
  const parameter: Json = { name: p.name, in: p.in, required: p.in === 'path' ? true : p.required === true, schema: primitiveSchema(p) };
  if (p.description !== undefined) parameter.description = p.description;
  if (p.allowEmptyValue) parameter.allowEmptyValue = true;
  if (p.type === 'array') Object.assign(parameter, styleOf(p.collectionFormat ?? 'csv', p.in));
  return parameter;
}

function formPropertySchema(p: Json): Json {
  const schema = p.type === 'file' ? { type: 'string', format: 'binary' } : primitiveSchema(p);
  return p.description !== undefined ? { ...schema, description: p.description } : schema;
}

function primitiveSchema(p: Json): Json {
  const schema: Json = {};
  for (const key of NON_BODY_KEYWORDS) if (p[key] !== undefined) schema[key] = p[key];
  if (p.items) schema.items = primitiveSchema(p.items);
  return schema;
}

function styleOf(collectionFormat: string, where: string): Json {
  switch (collectionFormat) {
    case 'multi':
      return { style: 'form', explode: true };
    case 'ssv':
      return { style: 'spaceDelimited', explode: false };
    case 'pipes':
      return { style: 'pipeDelimited', explode: false };
    default:
      return where === 'query' ? { style: 'form', explode: false } : { style: 'simple', explode: false };
  }
}

/** Swagger 2.0 schema -> OpenAPI 3.0: `x-nullable`, `file` and string discriminators have 3.0 forms. */
function toSchema3(schema: Json, depth = 0): Json {
  if (typeof schema !== 'object' || schema === null || depth > MAX_INLINE_DEPTH * 4) return schema;
  if (Array.isArray(schema)) return schema.map((s) => toSchema3(s, depth + 1)) as unknown as Json;
  const out: Json = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === 'x-nullable') out.nullable = value;
    else if (key === 'discriminator' && typeof value === 'string') out.discriminator = { propertyName: value };
    else if (key === 'type' && value === 'file') Object.assign(out, { type: 'string', format: 'binary' });
    else if (key === 'properties' && value && typeof value === 'object') {
      out.properties = Object.fromEntries(Object.entries<Json>(value).map(([name, s]) => [name, toSchema3(s, depth + 1)]));
    } else if (['items', 'additionalProperties', 'allOf'].includes(key) && typeof value === 'object') out[key] = toSchema3(value, depth + 1);
    else out[key] = value;
  }
  return out;
}

function deref(doc: Json, value: Json, depth = 0): Json {
  if (typeof value?.$ref !== 'string' || depth > MAX_INLINE_DEPTH) return value;
  return deref(doc, (resolveLocalRef(doc, value.$ref) ?? {}) as Json, depth + 1);
}

function convertSecurityDefinitions(definitions: Json): Json {
  const schemes: Json = {};
  for (const [name, d] of Object.entries<Json>(definitions)) {
    const description = d.description !== undefined ? { description: d.description } : {};
    if (d.type === 'basic') schemes[name] = { type: 'http', scheme: 'basic', ...description };
    else if (d.type === 'apiKey') schemes[name] = { type: 'apiKey', name: d.name, in: d.in, ...description };
    else if (d.type === 'oauth2') {
      const flowName = { implicit: 'implicit', password: 'password', application: 'clientCredentials', accessCode: 'authorizationCode' }[d.flow as string];
      if (!flowName) continue;
      const flow: Json = { scopes: d.scopes ?? {} };
      if (d.authorizationUrl) flow.authorizationUrl = d.authorizationUrl;
      if (d.tokenUrl) flow.tokenUrl = d.tokenUrl;
      schemes[name] = { type: 'oauth2', flows: { [flowName]: flow }, ...description };
    }
  }
  return schemes;
}
