import type { Json } from './spec-types.js';

/** The value a local `#/…` JSON pointer names in `doc`, or undefined (a `$ref` that is no string included). */
export function resolveLocalRef(doc: Json, ref: unknown): unknown {
  if (typeof ref !== 'string' || !ref.startsWith('#')) return undefined;
  const tokens = ref.slice(1).split('/').slice(1);
  let node: unknown = doc;
  for (const raw of tokens) {
    const token = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (typeof node !== 'object' || node === null || !Object.prototype.hasOwnProperty.call(node, token)) return undefined;
    node = (node as Json)[token];
  }
  return node;
}

/**
 * `#/definitions/User/properties/x` with section "definitions" and namespace "svc_1" becomes
 * `#/definitions/svc_1.User/properties/x`. Namespaces hold no "/" or "~", so the token needs no escaping.
 */
export function namespacedRef(ref: string, fromPrefix: string, toSection: string, namespace: string): string | undefined {
  if (!ref.startsWith(fromPrefix)) return undefined;
  return `#/${toSection}/${namespace}.${ref.slice(fromPrefix.length)}`;
}

/** Deep copy of `value` in which every `{ $ref }` object is replaced by what `mapRef` returns. */
export function mapRefs(value: unknown, mapRef: (ref: string, depth: number) => unknown, depth = 0): unknown {
  if (Array.isArray(value)) return value.map((item) => mapRefs(item, mapRef, depth));
  if (typeof value !== 'object' || value === null) return value;
  const object = value as Json;
  if (typeof object.$ref === 'string') return mapRef(object.$ref, depth);
  const copy: Json = {};
  for (const [key, child] of Object.entries(object)) copy[key] = mapRefs(child, mapRef, depth);
  return copy;
}

/** Inlined `$ref`s nest no deeper than this: a cycle through them is cut there. */
export const MAX_INLINE_DEPTH = 16;

/** What an unresolvable or external `$ref` becomes: an empty schema that says what was left out. */
export function unresolved(ref: string): Json {
  return { 'x-unresolved-ref': ref };
}
