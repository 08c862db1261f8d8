import type { Json } from './spec-types.js';

/**
 * Security requirements with their scheme names namespaced. A requirement naming a scheme that was
 * left out is dropped; if that leaves none, the operation says nothing rather than "no auth".
 */
export function namespacedSecurity(requirements: unknown, namespace: string, known: Json): Json[] | undefined {
  if (!Array.isArray(requirements)) return undefined;
  if (requirements.length === 0) return [];
  const kept = requirements
    .filter((requirement: Json) => Object.keys(requirement).every((name) => `${namespace}.${name}` in known))
    .map((requirement: Json) => Object.fromEntries(Object.entries(requirement).map(([name, scopes]) => [`${namespace}.${name}`, scopes])));
  return kept.length > 0 ? kept : undefined;
}
