import type { ParsedTemplate } from './template.js';

/**
 * The specificity order (docs/reference/routing.md#specificity): negative when `a` is more specific than `b`.
 * 1. the first position where the ranks differ decides, lower rank first;
 * 2. on equal overlapping ranks, the longer template first;
 * 3. then the canonical strings by UTF-16 code units, ascending.
 * Zero means equivalent (equal canonical strings).
 */
export function compareSpecificity(a: ParsedTemplate, b: ParsedTemplate): number {
  const ra = a.ranks;
  const rb = b.ranks;
  const overlap = Math.min(ra.length, rb.length);
  for (let i = 0; i < overlap; i++) {
    if (ra[i] !== rb[i]) return ra[i]! - rb[i]!;
  }
  if (ra.length !== rb.length) return rb.length - ra.length;
  return a.canonical < b.canonical ? -1 : a.canonical > b.canonical ? 1 : 0;
}
