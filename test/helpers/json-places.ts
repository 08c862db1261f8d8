// Test support for property tests that change a valid JSON value at random places (the config and
// upstream-doc validators against ajv compiling their schemas).

/** Every place in a value: existing ones, and a new key under each object. */
export function places(value: unknown, at: Array<string | number> = []): Array<Array<string | number>> {
  const found: Array<Array<string | number>> = [at];
  if (Array.isArray(value)) value.forEach((item, i) => found.push(...places(item, [...at, i])));
  else if (typeof value === 'object' && value !== null) {
    found.push([...at, 'unknownKey']);
    for (const [key, item] of Object.entries(value)) found.push(...places(item, [...at, key]));
  }
  return found;
}

/** A copy of `value` with the place `at` set to `by`. */
export function replaced(value: unknown, at: Array<string | number>, by: unknown): unknown {
  if (at.length === 0) return by;
  const copy = structuredClone(value) as Record<string | number, unknown>;
  let node = copy;
  for (const step of at.slice(0, -1)) node = node[step] as Record<string | number, unknown>;
  node[at[at.length - 1]!] = by;
  return copy;
}
