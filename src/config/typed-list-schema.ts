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
