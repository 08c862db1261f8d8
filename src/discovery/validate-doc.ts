import type { ServiceType } from '../config/types.js';
import { findObjections } from './doc-objections.js';
import { isObject, type DocKind, type Objection } from './objection.js';

export interface ValidatedDoc {
  kind: DocKind;
  /** "Swagger 2.0", "OpenAPI 3.0.3"... */
  version: string;
  /** A copy with its internal `$ref`s resolved; `$ref`s that do not resolve, or point outside, stand. */
  dereferenced: Record<string, any>;
  objections: Objection[];
}

/**
 * The most paths one doc may declare. Validation runs on the primary and its cost grows with the doc,
 * (the schema check's share is linear since it reads the doc in parts: schema-objections.ts): a valid
 * doc of 100,000 paths took 5.7 s (node, on the 2-core machine of docs/benchmarks.md); at this bound,
 * 1.6 s. Public APIs
 * declare far fewer: GitHub's REST API about 900.
 */
export const MAX_DOC_PATHS = 30_000;

/**
 * Decides what a parsed doc is and what a validator objects to in it, without refusing it for that.
 * Throws (the upstream fails) only when the doc is not a Swagger 2.0 / OpenAPI 3.x document at all: not
 * an object, no `swagger: "2.0"` or `openapi: "3.x"`, or no `paths` object to route. A doc of the other
 * kind than serviceType says is read as what it is, with an objection. External `$ref`s are never
 * followed: a doc must not make the gateway read files or reach other hosts.
 */
export async function validateDoc(doc: unknown, serviceType: ServiceType | null, where: string): Promise<ValidatedDoc> {
  if (!isObject(doc)) throw new Error(`${where}: the doc is ${Array.isArray(doc) ? 'an array' : `a ${doc === null ? 'null' : typeof doc}`}, not a Swagger 2.0 or OpenAPI 3.x object`);
  const found = docVersion(doc);
  if ('refused' in found) throw new Error(`${where}: the doc is ${found.refused}`);
  const { kind, version } = found;
  if (!isObject(doc.paths)) throw new Error(`${where}: the ${version} doc has no "paths" object, so nothing to route`);
  const pathCount = Object.keys(doc.paths).length;
  if (pathCount > MAX_DOC_PATHS) {
    throw new Error(`${where}: the ${version} doc declares ${pathCount} paths, more than the ${MAX_DOC_PATHS} the gateway reads from one doc`);
  }

  const first: Objection[] = [];
  if (serviceType !== null && serviceType !== 'static' && serviceType !== kind) {
    first.push({ pointer: [], message: `serviceType is "${serviceType}" but the doc is ${version}; it is read as ${version}` });
  }
  if (kind === 'openapi3' && typeof doc.openapi !== 'string') first.push({ pointer: ['openapi'], message: `must be a string (got ${JSON.stringify(doc.openapi)})` });
  const { dereferenced, objections } = await findObjections(doc, kind);
  return { kind, version, dereferenced, objections: [...first, ...objections] };
}

function docVersion(doc: Record<string, unknown>): { kind: DocKind; version: string } | { refused: string } {
  if (doc.swagger !== undefined) {
    // A number is a common slip ("swagger: 2.0" in YAML); the schema check reports it.
    if (doc.swagger === '2.0' || doc.swagger === 2) return { kind: 'swagger2', version: 'Swagger 2.0' };
    return { refused: `Swagger ${JSON.stringify(doc.swagger)}: neither Swagger 2.0 nor OpenAPI 3.x` };
  }
  if (doc.openapi !== undefined) {
    const version = String(doc.openapi);
    if (/^3(\.|$)/.test(version)) return { kind: 'openapi3', version: `OpenAPI ${version}` };
    return { refused: `OpenAPI ${JSON.stringify(doc.openapi)}: neither Swagger 2.0 nor OpenAPI 3.x` };
  }
  return { refused: 'neither Swagger nor OpenAPI (no "swagger" or "openapi" key; is specPath right?)' };
}
