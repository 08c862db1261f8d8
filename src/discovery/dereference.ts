type Json = Record<string, any>;
type Container = Json | unknown[];

/** What resolves a `#...` reference in the doc being dereferenced: its value, or a throw. */
export type ResolveRef = (ref: string) => unknown;

/**
 * Replaces, in place, each `$ref` into the doc (`#...`) with the value it points to, dereferenced in
 * turn; a value that several `$ref`s point to is shared, not copied. A `$ref` from which a loop can be
 * reached (a recursive schema, or one that holds a recursive schema somewhere below) is left standing,
 * as are `$ref`s out of the doc. Sibling keys of a `$ref` are merged over the value it points to.
 *
 * Each object is visited once, whatever the number of `$ref` paths leading to it: json-schema-ref-parser
 * walks a shared value again for every path to it when it leaves circular `$ref`s standing, which
 * a doc of 16 definitions that each point to the next three times turns into 3^16 walks.
 *
 * `resolve` is asked once per distinct `$ref`; what it throws is returned (the first), and that
 * `$ref` left standing.
 */
export function dereferenceInPlace(doc: Json, resolve: ResolveRef): Error | null {
  let firstError: Error | null = null;
  const targets = new Map<string, { value: unknown } | null>();
  const targetOf = (node: Json): { value: unknown } | null | undefined => {
    const ref = node.$ref;
    if (typeof ref !== 'string' || !ref.startsWith('#')) return undefined;
    let target = targets.get(ref);
    if (target === undefined) {
      try {
        target = { value: resolve(ref) };
      } catch (error) {
        firstError ??= error instanceof Error ? error : new Error(String(error));
        target = null;
      }
      targets.set(ref, target);
    }
    return target;
  };

  const successors = (node: Container): Container[] => {
    const next: Container[] = [];
    const target = Array.isArray(node) ? undefined : targetOf(node);
    if (target && isContainer(target.value)) next.push(target.value);
    for (const key of Object.keys(node)) {
      if (target !== undefined && key === '$ref') continue;
      const child = (node as Json)[key];
      if (isContainer(child)) next.push(child);
    }
    return next;
  };

  // What a `$ref` object is replaced with; absent while it stands.
  const replacement = new Map<Json, unknown>();
  const settle = (node: Container, loopBelow: boolean): void => {
    for (const key of Object.keys(node)) {
      const child = (node as Json)[key];
      if (isContainer(child) && replacement.has(child as Json)) (node as Json)[key] = replacement.get(child as Json);
    }
    if (Array.isArray(node) || loopBelow) return;
    const target = targetOf(node);
    if (!target) return;
    replacement.set(node, Object.keys(node).length > 1 ? merged(node, target.value) : target.value);
  };

  // Tarjan's strongly connected components, without recursion (a doc nests deeply): a component comes
  // out after every component it reaches, so what a node points to is settled before the node.
  const index = new Map<Container, number>();
  const low = new Map<Container, number>();
  const onStack = new Set<Container>();
  const stack: Container[] = [];
  const loops = new Map<Container, boolean>();
  const frames: { node: Container; next: Container[]; at: number }[] = [];
  let counter = 0;
  const open = (node: Container): void => {
    index.set(node, counter);
    low.set(node, counter);
    counter++;
    stack.push(node);
    onStack.add(node);
    frames.push({ node, next: successors(node), at: 0 });
  };
  open(doc);
  while (frames.length > 0) {
    const frame = frames[frames.length - 1]!;
    if (frame.at < frame.next.length) {
      const next = frame.next[frame.at++]!;
      if (!index.has(next)) open(next);
      else if (onStack.has(next)) low.set(frame.node, Math.min(low.get(frame.node)!, index.get(next)!));
      continue;
    }
    frames.pop();
    const { node } = frame;
    const parent = frames[frames.length - 1];
    if (parent) low.set(parent.node, Math.min(low.get(parent.node)!, low.get(node)!));
    if (low.get(node) !== index.get(node)) continue;
    const component: Container[] = [];
    let member: Container;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== node);
    const inComponent = new Set(component);
    let loopBelow = component.length > 1;
    for (const each of component) {
      for (const next of successors(each)) {
        if (inComponent.has(next) || loops.get(next) === true) loopBelow = true;
      }
    }
    for (const each of component) {
      loops.set(each, loopBelow);
      settle(each, loopBelow);
    }
  }
  return firstError;
}

function isContainer(value: unknown): value is Container {
  return typeof value === 'object' && value !== null;
}

/** A `$ref` with sibling keys: those keys, then the target's others (objects under one key merged). */
function merged(ref: Json, target: unknown): unknown {
  if (!isContainer(target)) return target;
  const out: Json = {};
  for (const key of Object.keys(ref)) if (key !== '$ref') out[key] = ref[key];
  for (const key of Object.keys(target)) {
    const value = (target as Json)[key];
    if (!(key in out)) out[key] = value;
    else if (isContainer(out[key]) && isContainer(value)) out[key] = deepMerge(value, out[key]);
  }
  return out;
}

/** `source` over `target`: arrays of `source` copied whole, objects merged key by key. */
function deepMerge(target: unknown, source: unknown): unknown {
  if (!isContainer(target) || !isContainer(source)) return source;
  const out: Json = Array.isArray(target) ? [...target] : { ...target };
  for (const key of Object.keys(source)) {
    const value = (source as Json)[key];
    if (Array.isArray(value)) out[key] = [...value];
    else if (isContainer(value)) out[key] = deepMerge((target as Json)[key], value);
    else out[key] = value;
  }
  return out;
}
