import { Rank, parseTemplate } from '../routing/template.js';

/** A variable segment of a template, as a Swagger 2.0 path parameter. */
export interface SwaggerPathParam {
  /** The placeholder's name in the Swagger path key: the segment's bare identifier. */
  readonly name: string;
  readonly rank: Rank;
  /** Regex segments whose regex can never match "/": the `pattern` a Swagger 2.0 parameter can carry. */
  readonly pattern?: string;
}

export interface SwaggerPath {
  /** The template written the way Swagger 2.0 reads a path: every variable segment as `{identifier}`. */
  readonly key: string;
  readonly params: readonly SwaggerPathParam[];
}

/**
 * `/files/{+path}` -> `/files/{path}`, `/user/{id: [0-9]+}` -> `/user/{id}`, `/img/{name}{.ext}` ->
 * `/img/{name}{ext}`: what a Swagger 2.0 validator and Swagger 2.0 tools can read. The template is
 * parsed by the routing compiler's parser, so this throws its TemplateSyntaxError for a template the
 * router refuses. A variable segment with no identifier (`{}`, `{+}`) is named `param<n>` (its position).
 */
export function swaggerPath(template: string): SwaggerPath {
  const parsed = parseTemplate(template);
  const params: SwaggerPathParam[] = [];
  let key = '/';
  for (const segment of parsed.segments) {
    if (segment.rank === Rank.Slash) key += '/';
    else if (segment.rank === Rank.Literal) key += segment.text;
    else {
      const name = segment.name === '' ? `param${params.length + 1}` : segment.name;
      const pattern = segment.regex && !segment.regex.canSpanSlash ? `^(?:${segment.regex.source})$` : undefined;
      params.push(pattern === undefined ? { name, rank: segment.rank } : { name, rank: segment.rank, pattern });
      key += `{${name}}`;
    }
  }
  return { key, params };
}

/** The bare identifier a doc may declare a path parameter by: `+path` -> `path`, `.ext` -> `ext`, `id: [0-9]+` -> `id`. */
export function parameterIdentifier(name: string): string {
  return name.replace(/^[+.?#;&/]/, '').split(':')[0]!.trim();
}
