import { isObject, type Objection } from './objection.js';

/**
 * `$ref`s that never reach a value: a `$ref` whose target is itself only a `$ref`, and so on round a
 * loop (`/a` -> `#/paths/~1b`, `/b` -> `#/paths/~1a`). The resolver leaves them standing as it leaves a
 * recursive schema's (whose target is a schema, so not a loop here), and a path item that is one has
 * no operation to route: said where each such `$ref` is, as one that does not resolve is. Only
 * `$ref`s into the doc (`#...`) are followed; the others are objections of their own already.
 */
export function refLoopObjections(doc: unknown): Objection[] {
  const objections: Objection[] = [];
  const loops = new Map<string, string[] | null>();
  const visit = (node: unknown, pointer: string[]): void => {
    if (Array.isArray(node)) {
      node.forEach((item, index) => {
        pointer.push(String(index));
        visit(item, pointer);
        pointer.pop();
      });
      return;
    }
    if (!isObject(node)) return;
    if (typeof node.$ref === 'string' && node.$ref.startsWith('#')) {
      const chain = loopOf(doc, node.$ref, loops);
      if (chain !== null) objections.push({ pointer: [...pointer], message: `$ref "${node.$ref}" never reaches a value: ${chain.join(' -> ')} goes round in a loop` });
    }
    for (const key of Object.keys(node)) {
      if (key === '$ref') continue;
      pointer.push(key);
      visit(node[key], pointer);
      pointer.pop();
    }
  };
  visit(doc, []);
  return objections;
}

/** The `$ref`s from `ref` until one comes back, when each target is only a `$ref` again; else null. */
function loopOf(doc: unknown, ref: string, known: Map<string, string[] | null>): string[] | null {
  const cached = known.get(ref);
  if (cached !== undefined) return cached;
  const chain: string[] = [];
  let current: string | null = ref;
  let found: string[] | null = null;
  while (current !== null) {
    chain.push(current);
    if (chain.indexOf(current) !== chain.length - 1) {
      found = chain;
      break;
    }
    const target = resolvePointer(doc, current);
    current = isObject(target) && typeof target.$ref === 'string' && target.$ref.startsWith('#') ? target.$ref : null;
  }
  known.set(ref, found);
  return found;
}

/** A `#/a/b~1c` fragment's value in the doc, or undefined. */
function resolvePointer(doc: unknown, ref: string): unknown {
  let tokens: string[];
  try {
    tokens = decodeURIComponent(ref.slice(1)).split('/').slice(1);
  } catch {
    return undefined;
  }
  let node = doc;
  for (const token of tokens) {
    const key = token.replace(/~1/g, '/').replace(/~0/g, '~');
    if (Array.isArray(node)) node = /^\d+$/.test(key) ? node[Number(key)] : undefined;
    else if (isObject(node) && Object.hasOwn(node, key)) node = node[key];
    else return undefined;
  }
  return node;
}
