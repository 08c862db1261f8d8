import { parseTemplate, Rank, type ParsedTemplate } from './template.js';

export interface TemplateWarningOptions {
  /** Also warn of a name given to two variable segments (a doc's validator already does, for a doc). */
  duplicateNames?: boolean;
}

/**
 * What is wrong with a template the router takes all the same (docs/reference/routing.md#path-templates):
 * parts no request path can hold, so that it never matches (a "?", a dot-segment), leading slashes
 * that make it route another path than it says, and a name two variable segments share (a request's
 * value for the first is lost). Said of docs' path keys and of `static` endpoints alike, as warnings:
 * a template the router refuses outright is the routing compiler's to report, so none is said of it.
 */
export function templateWarnings(raw: string, { duplicateNames = false }: TemplateWarningOptions = {}): string[] {
  let parsed: ParsedTemplate;
  try {
    parsed = parseTemplate(raw);
  } catch {
    return [];
  }
  const warnings: string[] = [];
  const routedAs = `/${raw.replace(/^\/+/, '')}`;
  if (!raw.startsWith('/')) warnings.push(`does not start with "/"; it is routed as "${routedAs}"`);
  else if (raw.startsWith('//')) warnings.push(`starts with "//", and leading slashes count as one: it is routed as "${routedAs}", never for a path that starts with "//"`);
  const { segments } = parsed;
  let question = false;
  segments.forEach((segment, i) => {
    if (segment.rank !== Rank.Literal) return;
    if (!question && segment.text.includes('?')) {
      question = true;
      warnings.push('holds "?", which starts a request\'s query: routing reads the path only, so no request matches it (a "?" inside a segment is written %3F)');
    }
    const whole = (i === 0 || segments[i - 1]!.rank === Rank.Slash) && (i === segments.length - 1 || segments[i + 1]!.rank === Rank.Slash);
    if (whole && (segment.text === '.' || segment.text === '..')) {
      warnings.push(`holds the dot-segment "${segment.text}", which the gateway resolves out of every request path: no request matches it`);
    }
  });
  if (duplicateNames) {
    const named = parsed.paramNames.filter((name) => name !== '');
    for (const name of new Set(named.filter((name, i) => named.indexOf(name) !== i))) {
      warnings.push(`has multiple path placeholders named {${name}}: a request's value for the last one is the only one kept`);
    }
  }
  return warnings;
}
