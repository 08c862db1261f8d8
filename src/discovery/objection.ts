/** One thing a validator objects to in a doc: where (a JSON pointer, as tokens) and what. */
export interface Objection {
  readonly pointer: readonly string[];
  readonly message: string;
}

export type DocKind = 'swagger2' | 'openapi3';

export const SWAGGER2_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch'] as const;
export const OPENAPI3_METHODS = [...SWAGGER2_METHODS, 'trace'] as const;

export function methodsOf(kind: DocKind): readonly string[] {
  return kind === 'swagger2' ? SWAGGER2_METHODS : OPENAPI3_METHODS;
}

export function isObject(value: unknown): value is Record<string, any> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Tokens as a JSON pointer fragment: `#/paths/~1users~1{id}/get`. */
export function pointerText(tokens: readonly string[]): string {
  return `#${tokens.map((token) => `/${token.replace(/~/g, '~0').replace(/\//g, '~1')}`).join('')}`;
}
