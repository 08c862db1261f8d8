import { findObjections } from '../discovery/doc-objections.js';
import type { Objection } from '../discovery/objection.js';
import { SWAGGER2_METHODS, UPSTREAM_RESPONSE, swaggerPlaceholders, type Json } from './spec-types.js';

/** Rounds of check-and-repair: one repairs what the upstreams said wrong, a second what a repair exposed. */
const MAX_ROUNDS = 3;

const NOTE = "Swagger 2.0 cannot carry the upstream's description of this as it is (see the upstream's problems in the health report)";

/** The operation fields a stand-in keeps: the gateway's own extensions and plain descriptive strings. */
const KEPT_EXTENSIONS = ['x-template', 'x-upstreams', 'x-collapsed-templates', 'x-disabled-middleware', 'x-disabled-listeners'] as const;

export interface GuardedSpec {
  doc: Json;
  /** JSON pointers of what was replaced (empty when the doc validated as built). */
  repaired: string[];
  /** What swagger-parser still objects to after the last round (empty when the doc is valid). */
  remaining: Objection[];
}

/**
 * /spec must validate as Swagger 2.0 whatever the upstreams publish. The combined doc is checked with
 * swagger-parser (the same checks discovery reports per endpoint); an operation it objects to is
 * replaced by a stand-in that says only what the gateway knows (its path parameters, the upstreams, the
 * template) and a shared definition, parameter or response by a neutral one, each carrying a note.
 * The doc is modified in place.
 */
export async function guardSpec(doc: Json): Promise<GuardedSpec> {
  const repaired: string[] = [];
  let remaining: Objection[] = [];
  for (let round = 0; round < MAX_ROUNDS; round++) {
    remaining = (await findObjections(doc, 'swagger2')).objections;
    if (remaining.length === 0) break;
    let changed = false;
    for (const { pointer } of remaining) {
      const where = repair(doc, pointer);
      if (where !== null && !repaired.includes(where)) {
        repaired.push(where);
        changed = true;
      }
    }
    if (!changed) break;
  }
  return { doc, repaired, remaining };
}

/** Replaces what `pointer` lies in; returns the pointer of what was replaced, or null. */
function repair(doc: Json, pointer: readonly string[]): string | null {
  const [section, name, method] = pointer;
  if (name === undefined) return null;
  const where = `#/${section}/${name}`;
  switch (section) {
    case 'paths': {
      const pathItem = doc.paths?.[name];
      if (!pathItem || method === undefined || !(SWAGGER2_METHODS as readonly string[]).includes(method) || !pathItem[method]) return null;
      if (pathItem[method]['x-spec-note'] !== undefined) {
        delete pathItem[method]; // even the stand-in is refused: leave the operation out
        if (Object.keys(pathItem).length === 0) delete doc.paths[name];
      } else {
        pathItem[method] = standIn(name, pathItem[method]);
      }
      return `${where}/${method}`;
    }
    case 'definitions':
      if (!doc.definitions?.[name]) return null;
      doc.definitions[name] = { description: NOTE };
      return where;
    case 'responses':
      if (!doc.responses?.[name]) return null;
      doc.responses[name] = { description: NOTE };
      return where;
    case 'parameters': {
      const parameter = doc.parameters?.[name];
      if (!parameter) return null;
      const parameterName = typeof parameter.name === 'string' ? parameter.name : name;
      doc.parameters[name] =
        parameter.in === 'body'
          ? { name: parameterName, in: 'body', schema: {}, description: NOTE }
          : { name: parameterName, in: 'query', type: 'string', description: NOTE };
      return where;
    }
    case 'securityDefinitions':
      if (!doc.securityDefinitions?.[name]) return null;
      delete doc.securityDefinitions[name];
      return where;
    default:
      return null;
  }
}

function standIn(path: string, operation: Json): Json {
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
