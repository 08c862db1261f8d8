import { joinTemplate } from '../discovery/base-path.js';
import { isObject } from '../discovery/objection.js';
import { Openapi3SchemaConverter } from './spec-openapi3-schema.js';
import { resolveLocalRef } from './spec-refs.js';
import { namespacedSecurity } from './spec-security.js';
import { SWAGGER2_METHODS, UPSTREAM_RESPONSE, emptyPart, type Json, type SpecPart } from './spec-types.js';

const PRIMITIVE_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'array']);
const FORM_MEDIA_TYPE = /^(multipart\/form-data|application\/x-www-form-urlencoded)\b/i;
/** Non-body parameter keywords of Swagger 2.0 that a converted schema may carry over. */
const PARAM_SCHEMA_KEYWORDS = [
  'format', 'default', 'maximum', 'exclusiveMaximum', 'minimum', 'exclusiveMinimum', 'maxLength', 'minLength',
  'pattern', 'maxItems', 'minItems', 'uniqueItems', 'enum', 'multipleOf',
] as const;
const OPERATION_KEYS = ['tags', 'summary', 'description', 'externalDocs', 'operationId', 'deprecated'] as const;

/**
 * An OpenAPI 3.x upstream converted as far as Swagger 2.0 can say it: components/schemas become
 * definitions, requestBody a body (or formData) parameter, content types consumes/produces. Left out:
 * cookie parameters, parameters whose value is an object, differing schemas for one body or response
 * (the schema is then omitted), response code ranges like "2XX", callbacks, links, the TRACE method,
 * security schemes 2.0 lacks (bearer, openIdConnect, mutualTLS, cookie API keys).
 */
export function partFromOpenapi3(doc: Json, namespace: string, basePath: string): SpecPart {
  return new Openapi3Conversion(doc, namespace).run(basePath);
}

class Openapi3Conversion {
  private readonly schemas: Openapi3SchemaConverter;

  constructor(
    private readonly doc: Json,
    private readonly namespace: string,
  ) {
    this.schemas = new Openapi3SchemaConverter(doc, namespace);
  }

  run(basePath: string): SpecPart {
    const part = emptyPart();
    for (const [name, schema] of Object.entries<unknown>(this.doc.components?.schemas ?? {})) {
      part.definitions[`${this.namespace}.${name}`] = this.schemas.convert(schema);
    }
    for (const [name, scheme] of Object.entries<Json>(this.doc.components?.securitySchemes ?? {})) {
      const converted = convertSecurityScheme(this.deref(scheme));
      if (converted) part.securityDefinitions[`${this.namespace}.${name}`] = converted;
    }
    part.tags = Array.isArray(this.doc.tags) ? this.doc.tags.map((tag: Json) => ({ ...tag })) : [];

    for (const [pathKey, rawItem] of Object.entries<Json>(this.doc.paths ?? {})) {
      if (!pathKey.startsWith('/')) continue;
      const pathItem = this.deref(rawItem);
      for (const method of SWAGGER2_METHODS) {
        const source: unknown = pathItem[method];
        if (!isObject(source)) continue;
        const operation = this.convertOperation(source, pathItem.parameters, part.securityDefinitions);
        part.operations.push({ path: joinTemplate(basePath, pathKey), method, operation });
      }
    }
    return part;
  }

  private convertOperation(source: Json, pathLevelParameters: unknown, securityDefinitions: Json): Json {
    const operation: Json = {};
    for (const key of OPERATION_KEYS) if (source[key] !== undefined) operation[key] = source[key];
    for (const key of Object.keys(source)) if (key.startsWith('x-')) operation[key] = source[key];

    const parameters = this.parameters(pathLevelParameters, source.parameters)
      .map((p) => this.convertParameter(p))
      .filter((p): p is Json => p !== undefined);
    const body = source.requestBody ? this.deref(source.requestBody) : undefined;
    if (body?.content) {
      operation.consumes = Object.keys(body.content);
      parameters.push(...this.bodyParameters(body));
    }
    operation.parameters = parameters;

    const { responses, produces } = this.responses(source.responses ?? {});
    if (produces.length > 0) operation.produces = produces;
    operation.responses = responses;

    const security = namespacedSecurity(source.security ?? this.doc.security, this.namespace, securityDefinitions);
    if (security) operation.security = security;
    return operation;
  }

  private parameters(pathLevel: unknown, operationLevel: unknown): Json[] {
    const list = (value: unknown) => (Array.isArray(value) ? value.map((p) => this.deref(p)).filter(isObject) : []);
    const own = list(operationLevel);
    const inherited = list(pathLevel).filter((p) => !own.some((o) => o.name === p.name && o.in === p.in));
    return [...own, ...inherited];
  }

  private convertParameter(parameter: Json): Json | undefined {
    if (!['path', 'query', 'header'].includes(parameter.in)) return undefined; // cookie
    const isPath = parameter.in === 'path';
    const schema = parameter.schema ? this.schemas.resolve(parameter.schema) : undefined;
    const value = schema ? this.primitive(schema, defaultCollectionFormat(parameter)) : undefined;
    if (!value && !isPath) return undefined;
    const converted: Json = { name: parameter.name, in: parameter.in, ...(value ?? { type: 'string' }) };
    if (parameter.description !== undefined) converted.description = parameter.description;
    converted.required = isPath ? true : parameter.required === true;
    if (parameter.in === 'query' && parameter.allowEmptyValue === true) converted.allowEmptyValue = true;
    return converted;
  }

  /** A schema as Swagger 2.0 non-body parameter fields, or undefined when it is not a primitive or array of them. */
  private primitive(schema: Json, collectionFormat: string | undefined, depth = 0): Json | undefined {
    const converted = this.schemas.convert(schema);
    const type = converted.type ?? 'string';
    if (!PRIMITIVE_TYPES.has(type) || depth > 2) return undefined;
    const out: Json = { type };
    for (const key of PARAM_SCHEMA_KEYWORDS) if (converted[key] !== undefined) out[key] = converted[key];
    if (type === 'array') {
      const items = this.schemas.resolve(schema.items);
      const itemFields = items ? this.primitive(items, undefined, depth + 1) : { type: 'string' };
      if (!itemFields) return undefined;
      out.items = itemFields;
      if (collectionFormat) out.collectionFormat = collectionFormat;
    }
    return out;
  }

  private bodyParameters(body: Json): Json[] {
    const entries = Object.entries<Json>(body.content);
    const schema = sameSchema(entries.map(([, media]) => media?.schema));
    if (entries.every(([type]) => FORM_MEDIA_TYPE.test(type)) && schema) {
      const form = this.formParameters(schema);
      if (form) return form;
    }
    const parameter: Json = { name: 'body', in: 'body', required: body.required === true, schema: schema ? this.schemas.convert(schema) : {} };
    if (body.description !== undefined) parameter.description = body.description;
    return [parameter];
  }

  /** An object schema of primitive properties as formData parameters (a binary string is a file). */
  private formParameters(schema: unknown): Json[] | undefined {
    const object = this.schemas.resolve(schema);
    if (!object?.properties) return undefined;
    const required: string[] = Array.isArray(object.required) ? object.required : [];
    const parameters: Json[] = [];
    for (const [name, property] of Object.entries<unknown>(object.properties)) {
      const resolved = this.schemas.resolve(property);
      if (!resolved) return undefined;
      const isFile = resolved.type === 'string' && (resolved.format === 'binary' || resolved.format === 'base64');
      const value = isFile ? { type: 'file' } : this.primitive(resolved, 'multi');
      if (!value) return undefined;
      const parameter: Json = { name, in: 'formData', required: required.includes(name), ...value };
      if (resolved.description !== undefined) parameter.description = resolved.description;
      parameters.push(parameter);
    }
    return parameters;
  }

  private responses(source: Json): { responses: Json; produces: string[] } {
    const responses: Json = {};
    const produces = new Set<string>();
    for (const [code, raw] of Object.entries<Json>(source)) {
      const response = this.deref(raw);
      for (const type of Object.keys(response.content ?? {})) produces.add(type);
      if (!/^(\d{3}|default)$/.test(code)) continue; // 2.0 has no ranges like "2XX"
      const converted: Json = { description: response.description ?? '' };
      const schema = sameSchema(Object.values<Json>(response.content ?? {}).map((media) => media?.schema));
      if (schema) converted.schema = this.schemas.convert(schema);
      const headers = this.headers(response.headers);
      if (headers) converted.headers = headers;
      for (const key of Object.keys(response)) if (key.startsWith('x-')) converted[key] = response[key];
      responses[code] = converted;
    }
    return { responses: Object.keys(responses).length > 0 ? responses : { ...UPSTREAM_RESPONSE }, produces: [...produces] };
  }

  private headers(source: unknown): Json | undefined {
    if (!source || typeof source !== 'object') return undefined;
    const headers: Json = {};
    for (const [name, raw] of Object.entries(source as Json)) {
      const header = this.deref(raw);
      const schema = header.schema ? this.schemas.resolve(header.schema) : undefined;
      const value = schema ? this.primitive(schema, 'csv') : undefined;
      if (!value) continue;
      headers[name] = header.description !== undefined ? { ...value, description: header.description } : value;
    }
    return Object.keys(headers).length > 0 ? headers : undefined;
  }

  /** A parameter, body, response, header or path item, its `$ref` (local) followed. */
  private deref(value: unknown, depth = 0): Json {
    const object = (value ?? {}) as Json;
    if (typeof object.$ref !== 'string' || depth > 8) return object;
    return this.deref(resolveLocalRef(this.doc, object.$ref), depth + 1);
  }
}

/** The one schema every media type shares, or undefined when they differ (2.0 has one per body/response). */
function sameSchema(schemas: unknown[]): unknown {
  const present = schemas.filter((s) => s !== undefined);
  if (present.length === 0 || present.length !== schemas.length) return undefined;
  const first = JSON.stringify(present[0]);
  return present.every((s) => JSON.stringify(s) === first) ? present[0] : undefined;
}

/** OpenAPI 3 `style`/`explode` as a Swagger 2.0 collectionFormat. */
function defaultCollectionFormat(parameter: Json): string {
  const style = parameter.style ?? (parameter.in === 'query' ? 'form' : 'simple');
  const explode = parameter.explode ?? style === 'form';
  if (style === 'form') return explode ? 'multi' : 'csv';
  if (style === 'spaceDelimited') return 'ssv';
  if (style === 'pipeDelimited') return 'pipes';
  return 'csv';
}

function convertSecurityScheme(scheme: Json): Json | undefined {
  const extra = scheme.description !== undefined ? { description: scheme.description } : {};
  if (scheme.type === 'apiKey' && (scheme.in === 'header' || scheme.in === 'query')) {
    return { type: 'apiKey', name: scheme.name, in: scheme.in, ...extra };
  }
  if (scheme.type === 'http' && String(scheme.scheme).toLowerCase() === 'basic') return { type: 'basic', ...extra };
  if (scheme.type === 'oauth2' && scheme.flows) {
    const flows = scheme.flows as Json;
    const scopes = (flow: Json) => ({ scopes: { ...(flow.scopes ?? {}) } });
    if (flows.authorizationCode) {
      const f = flows.authorizationCode;
      return { type: 'oauth2', flow: 'accessCode', authorizationUrl: f.authorizationUrl, tokenUrl: f.tokenUrl, ...scopes(f), ...extra };
    }
    if (flows.implicit) return { type: 'oauth2', flow: 'implicit', authorizationUrl: flows.implicit.authorizationUrl, ...scopes(flows.implicit), ...extra };
    if (flows.password) return { type: 'oauth2', flow: 'password', tokenUrl: flows.password.tokenUrl, ...scopes(flows.password), ...extra };
    if (flows.clientCredentials) {
      return { type: 'oauth2', flow: 'application', tokenUrl: flows.clientCredentials.tokenUrl, ...scopes(flows.clientCredentials), ...extra };
    }
  }
  return undefined;
}
