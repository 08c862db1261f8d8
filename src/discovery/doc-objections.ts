import { isObject, type DocKind, type Objection } from './objection.js';
import { schemaObjections } from './schema-objections.js';
import { specObjections } from './spec-objections.js';
import { refLoopObjections } from './ref-loops.js';
import { dereferenceInPlace } from './dereference.js';

type Json = Record<string, any>;

/** Only the doc itself: a `$ref` must never make the gateway read a file or reach another host. */
const INTERNAL_ONLY = { resolve: { external: false, file: false, http: false } } as const;

/**
 * A `$ref` that does not resolve is rewritten to this (plus the original) in the working copy: the
 * resolver skips it as external, and the validators take it for the JSON Reference it was.
 */
const UNRESOLVED = 'unresolved:';

export interface CheckedDoc {
  /** A copy of the doc with its internal `$ref`s resolved (circular ones and unusable ones left standing). */
  dereferenced: Json;
  /** What swagger-parser objects to, in the order: `$ref`s, schema, spec. */
  objections: Objection[];
}

/**
 * Everything swagger-parser would object to in a Swagger 2.0 or OpenAPI 3.x doc, without refusing it:
 * `$ref`s that do not resolve, point outside the doc (not followed) or go round in a loop of `$ref`s
 * (ref-loops.ts), objections of the official
 * schema (checked as written, so a bad shared definition is reported once, where it is), and of its
 * spec checks (per operation, on the dereferenced doc). The doc itself is not modified.
 */
export async function findObjections(doc: Json, kind: DocKind): Promise<CheckedDoc> {
  // Loaded here, not at import: about 24 modules that the compile threads and workers rarely need.
  const { $RefParser } = await import('@apidevtools/json-schema-ref-parser');
  const objections: Objection[] = [];
  const written = structuredClone(doc);
  // swagger-parser's resolver, without swagger-parser's own parse step: that one refuses a doc for a
  // version number written as a number, which is an objection here, not a failure.
  const $refs = (await new $RefParser().resolve(written as never, INTERNAL_ONLY as never)) as unknown as { exists(ref: string): boolean };
  const resolves = (ref: string): boolean => {
    try {
      return $refs.exists(ref);
    } catch {
      return false;
    }
  };
  markUnusableRefs(written, [], resolves, objections);
  for (const objection of refLoopObjections(written)) objections.push(objection);

  const dereferenced = structuredClone(written);
  const inCopy = (await new $RefParser().resolve(dereferenced as never, INTERNAL_ONLY as never)) as unknown as { get(ref: string): unknown };
  // Every $ref left is marked above; anything else the resolver trips on is one more objection.
  const error = dereferenceInPlace(dereferenced, (ref) => inCopy.get(ref));
  if (error) objections.push({ pointer: [], message: `$ref resolution: ${error.message}` });
  if (kind === 'openapi3' && typeof written.openapi !== 'string') written.openapi = String(written.openapi);
  // Appended one by one: a doc of 100,000 paths can have as many objections, too many to spread
  // into one call's arguments ("Maximum call stack size exceeded").
  for (const objection of schemaObjections(written)) objections.push(objection);
  for (const objection of specObjections(dereferenced, kind)) objections.push(objection);
  return { dereferenced, objections };
}

/** `pointer` is the path down to `node`, as a stack: copied only when an objection keeps it. */
function markUnusableRefs(node: unknown, pointer: string[], resolves: (ref: string) => boolean, objections: Objection[]): void {
  if (Array.isArray(node)) {
    for (let index = 0; index < node.length; index++) {
      pointer.push(String(index));
      markUnusableRefs(node[index], pointer, resolves, objections);
      pointer.pop();
    }
    return;
  }
  if (!isObject(node)) return;
  const ref = node.$ref;
  if (typeof ref === 'string') {
    if (!ref.startsWith('#')) {
      objections.push({ pointer: [...pointer], message: `$ref "${ref}" points outside the doc; it is not followed` });
    } else if (!resolves(ref)) {
      objections.push({ pointer: [...pointer], message: `$ref "${ref}" does not resolve` });
      node.$ref = UNRESOLVED + ref;
    }
  }
  for (const key of Object.keys(node)) {
    if (key === '$ref') continue;
    pointer.push(key);
    markUnusableRefs(node[key], pointer, resolves, objections);
    pointer.pop();
  }
}
