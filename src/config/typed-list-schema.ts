/**
 * The schema of a config list whose entries are typed by their `type` key (`middleware`, `listeners`):
 * the keys every entry has, then, per type, that type's own keys and no others (`additionalProperties:
 * false` in each branch, so a key of another type, or a typo, is named in the error).
 */

/** A type's keys beyond the common ones, as its module exports them. */
export interface TypeSchema {
  readonly description: string;
  readonly required: readonly string[];
  readonly properties: Readonly<Record<string, unknown>>;
}

export function typedListSchema(description: string, common: Record<string, unknown>, types: Readonly<Record<string, TypeSchema>>): Record<string, unknown> {
  return {
    type: 'array',
    default: [],
    description,
    items: {
      type: 'object',
      required: ['id', 'type'],
      properties: common,
      allOf: Object.entries(types).map(([type, schema]) => ({
        if: { properties: { type: { const: type } }, required: ['type'] },
        then: {
          description: schema.description,
          required: schema.required,
          additionalProperties: false,
          properties: { ...common, ...schema.properties },
        },
      })),
    },
  };
}

/**
 * A rule between an entry's keys that its schema cannot say (maxEntryBytes against maxBytes), found by
 * its type's own check: `key` is the key blamed, under the entry's pointer.
 */
export interface EntryProblem {
  readonly key: string;
  readonly reason: string;
}

/**
 * Each entry's problems as its type's `check` finds them, with pointers under `/<list>/<index>`. The same
 * check runs when the config is loaded (gateway check, start, reload) and in the worker before it builds
 * the entries, so a worker never meets an entry the primary accepted and it cannot build. Entries of an
 * unknown type, or the schema refused, are skipped (the schema names them).
 */
export function typedListProblems<E extends { readonly type: string }>(
  list: string,
  entries: readonly E[],
  check: (entry: E) => readonly EntryProblem[] | undefined,
): Array<{ pointer: string; reason: string }> {
  const problems: Array<{ pointer: string; reason: string }> = [];
  entries.forEach((entry, index) => {
    for (const problem of check(entry) ?? []) problems.push({ pointer: `/${list}/${index}/${problem.key}`, reason: problem.reason });
  });
  return problems;
}
