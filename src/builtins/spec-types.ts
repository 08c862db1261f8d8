/** A Swagger 2.0 fragment, loosely typed: the docs come from upstreams and are only known to be valid. */
export type Json = Record<string, any>;

export const SWAGGER2_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch'] as const;

/** One operation, ready for the combined doc except for the merge (first upstream wins, unique ids). */
export interface SpecOperation {
  /** Full path template (base path folded in). */
  path: string;
  method: (typeof SWAGGER2_METHODS)[number];
  operation: Json;
}

/** What one upstream contributes to the combined doc; every name is already namespaced. */
export interface SpecPart {
  operations: SpecOperation[];
  definitions: Json;
  parameters: Json;
  responses: Json;
  securityDefinitions: Json;
  tags: Json[];
}

export function emptyPart(): SpecPart {
  return { operations: [], definitions: {}, parameters: {}, responses: {}, securityDefinitions: {}, tags: [] };
}

/** The placeholders Swagger 2.0 validators look for, exactly as swagger-parser finds them. */
export function swaggerPlaceholders(path: string): string[] {
  return [...path.matchAll(/\{([^/}]+)}/g)].map((match) => match[1]!);
}

/** Response used where an upstream said nothing Swagger 2.0 can carry. */
export const UPSTREAM_RESPONSE = { default: { description: 'Response of the upstream' } };
