import { findObjections } from '../discovery/doc-objections.js';
import { pointerText, type Objection } from '../discovery/objection.js';
import { SWAGGER2_METHODS, UPSTREAM_RESPONSE, swaggerPlaceholders, type Json } from './spec-types.js';

/** Rounds of check-and-repair: one repairs what the upstreams said wrong, a second what a repair exposed. */
const MAX_ROUNDS = 3;

const NOTE = "Swagger 2.0 cannot carry the upstream's description of this as it is (see the upstream's problems in the health report)";

/** The operation fields a stand-in keeps: the gateway's own extensions and plain descriptive strings. */
const KEPT_EXTENSIONS = ['x-template', 'x-upstreams', 'x-collapsed-templates', 'x-disabled-middleware', 'x-disabled-listeners'] as const;

/**
 * What needs checking: the operations these upstreams describe and the names in these namespaces. The
 * rest comes from docs with nothing to object to, which combine into valid Swagger 2.0 as they are, and
 * checking a large doc whole takes seconds.
 */
export interface GuardScope {
  /** serviceLocations of the upstreams whose docs have problems. */
  upstreams: ReadonlySet<string>;
  /** Their namespaces in the combined doc (`svc_8080` for `svc_8080.User`). */
  namespaces: ReadonlySet<string>;
}

export interface GuardedSpec {
  doc: Json;
  /** JSON pointers of what was left out or replaced (empty when the doc validated as built). */
  repaired: string[];
  /** What swagger-parser still objects to after the last round (empty when the doc is valid). */
  remaining: Objection[];
}

/**
 * /spec must validate as Swagger 2.0 whatever the upstreams publish. The combined doc is checked with
 * swagger-parser (the same checks discovery reports per endpoint). An unknown field is left out; an
 * operation it objects to otherwise is replaced by a stand-in that says only what the gateway knows (its path parameters, the upstreams, the
 * template) and a shared definition, parameter or response by a neutral one, each carrying a note.
 * The doc is modified in place. With a scope, only that part is checked (pointers are the same).
 */
export async function guardSpec(doc: Json, scope?: GuardScope): Promise<GuardedSpec> {
  const repaired: string[] = [];
  let remaining: Objection[] = [];
  for (let round = 0; round < MAX_ROUNDS; round++) {
    remaining = (await findObjections(scope ? scoped(doc, scope) : doc, 'swagger2')).objections;
    if (remaining.length === 0) break;
    let changed = false;
    const replacedThisRound = new Set<string>();
    for (const { pointer, message } of remaining) {
      const dropped = dropUnknownField(doc, pointer, message);
      // An operation (or definition) objected to twice is replaced once: the second objection is
      // about the original, not the stand-in.
      const target = pointerText(pointer.slice(0, pointer[0] === 'paths' ? 3 : 2));
      if (dropped === null && replacedThisRound.has(target)) continue;
      const where = dropped ?? repair(doc, pointer);
      if (where === null) continue;
      if (dropped === null) replacedThisRound.add(target);
      if (!repaired.includes(where)) repaired.push(where);
      changed = true;
    }
    if (!changed) break;
  }
  return { doc, repaired, remaining };
}

/** The part of the doc in scope, as a doc of its own: the same pointers reach the same objects. */
function scoped(doc: Json, scope: GuardScope): Json {
  const paths: Json = {};
  for (const [key, pathItem] of Object.entries<Json>(doc.paths ?? {})) {
    for (const [method, operation] of Object.entries<Json>(pathItem)) {
      // The first upstream listed describes the operation (the others serve it too).
      if (scope.upstreams.has(operation?.['x-upstreams']?.[0])) (paths[key] ??= {})[method] = operation;
    }
  }
  const inScope = (section: Json | undefined): Json =>
    Object.fromEntries(Object.entries(section ?? {}).filter(([name]) => scope.namespaces.has(name.slice(0, name.indexOf('.')))));
  const part: Json = { swagger: '2.0', info: doc.info, paths, definitions: inScope(doc.definitions) };
  for (const section of ['parameters', 'responses', 'securityDefinitions'] as const) {
    const names = inScope(doc[section]);
    if (Object.keys(names).length > 0) part[section] = names;
  }
  return part;
}

/** An unknown field (a typo, an invention) is simply left out; returns its pointer, or null. */
function dropUnknownField(doc: Json, pointer: readonly string[], message: string): string | null {
  const field = /^unknown field "(.*)"$/.exec(message)?.[1];
  if (field === undefined) return null;
  let node: unknown = doc;
  for (const token of pointer) node = typeof node === 'object' && node !== null ? (node as Json)[token] : undefined;
  if (typeof node !== 'object' || node === null || !(field in node)) return null;
  delete (node as Json)[field];
  return pointerText([...pointer, field]);
}

/** Replaces what `pointer` lies in; returns the pointer of what was replaced, or null. */
function repair(doc: Json, pointer: readonly string[]): string | null {
  const [section, name, method] = pointer;
  if (name === undefined) return null;
  const where = pointerText([section!, name]);
  switch (section) {
    case 'paths': {
      const pathItem = doc.paths?.[name];
      if (!pathItem || method === undefined || !(SWAGGER2_METHODS as readonly string[]).includes(method) || !has(pathItem, method)) return null;
      if (pathItem[method]?.['x-spec-note'] !== undefined) {
        delete pathItem[method]; // even the stand-in is refused: leave the operation out
        if (Object.keys(pathItem).length === 0) delete doc.paths[name];
      } else {
        pathItem[method] = standIn(name, pathItem[method]);
      }
      return pointerText([section!, name, method]);
    }
    case 'definitions':
      if (!has(doc.definitions, name)) return null;
      doc.definitions[name] = { description: NOTE };
      return where;
    case 'responses':
      if (!has(doc.responses, name)) return null;
      doc.responses[name] = { description: NOTE };
      return where;
    case 'parameters': {
      if (!has(doc.parameters, name)) return null;
      const parameter = doc.parameters[name];
      const parameterName = typeof parameter?.name === 'string' ? parameter.name : name;
      doc.parameters[name] =
        parameter?.in === 'body'
          ? { name: parameterName, in: 'body', schema: {}, description: NOTE }
          : { name: parameterName, in: 'query', type: 'string', description: NOTE };
      return where;
    }
    case 'securityDefinitions':
      if (!has(doc.securityDefinitions, name)) return null;
      delete doc.securityDefinitions[name];
      return where;
    default:
      return null;
  }
}

function has(section: unknown, name: string): boolean {
  return typeof section === 'object' && section !== null && Object.prototype.hasOwnProperty.call(section, name);
}

function standIn(path: string, operation: Json | null): Json {
  operation ??= {};
  const described: Json = {
    parameters: swaggerPlaceholders(path).map((placeholder) => ({ name: placeholder, in: 'path', required: true, type: 'string' })),
    responses: { ...UPSTREAM_RESPONSE },
  };
  for (const key of ['operationId', 'summary', 'description'] as const) if (typeof operation[key] === 'string') described[key] = operation[key];
  for (const key of ['tags', 'consumes', 'produces'] as const) {
    const list = operation[key];
    if (Array.isArray(list) && list.every((item) => typeof item === 'string')) described[key] = [...list];
  }
  for (const key of KEPT_EXTENSIONS) if (operation[key] !== undefined) described[key] = operation[key];
  described['x-spec-note'] = NOTE;
  return described;
}
