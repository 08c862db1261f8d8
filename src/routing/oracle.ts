import { formatAllow } from './methods.js';
import { compareSpecificity } from './specificity.js';
import { LINEAR } from './segment-regex.js';
import { Rank, type ParsedTemplate, type Segment } from './template.js';

/**
 * The reference algorithm (docs/reference/routing.md#specificity): every template sorted by specificity, one anchored
 * regex each, the first that matches and declares the method wins. Linear in the number of templates:
 * kept as the yardstick that tests and benches hold the trie to, never used to serve traffic.
 */
export interface OracleAnswer {
  status: 200 | 404 | 405;
  template: ParsedTemplate | null;
  method: string | null;
  allow: string;
  autoOptions: boolean;
  headAsGet: boolean;
  params: Record<string, string>;
}

interface OracleRoute {
  readonly template: ParsedTemplate;
  readonly pattern: RegExp;
  /** For each param (in order), the index of its capture group. */
  readonly groups: readonly number[];
  readonly methods: Set<string>;
}

export class RoutingOracle {
  private readonly routes: OracleRoute[] = [];

  constructor(entries: Iterable<{ method: string; template: ParsedTemplate }>) {
    const byCanonical = new Map<string, OracleRoute>();
    for (const { method, template } of entries) {
      let route = byCanonical.get(template.canonical);
      if (!route) {
        route = { template, ...oracleRegex(template), methods: new Set() };
        byCanonical.set(template.canonical, route);
        this.routes.push(route);
      }
      route.methods.add(method);
    }
    this.routes.sort((a, b) => compareSpecificity(a.template, b.template));
  }

  /** Templates in specificity order. */
  templates(): ParsedTemplate[] {
    return this.routes.map((r) => r.template);
  }

  lookup(method: string, path: string): OracleAnswer {
    const matching = this.routes.map((r) => ({ route: r, match: r.pattern.exec(path) })).filter((m) => m.match !== null);
    const pick = (m: string) => matching.find((x) => x.route.methods.has(m));
    let chosen = pick(method);
    let headAsGet = false;
    if (!chosen && method === 'HEAD') {
      chosen = pick('GET');
      headAsGet = chosen !== undefined;
    }
    if (chosen) {
      const { route, match } = chosen;
      const entries: Array<[string, string]> = [];
      route.template.paramNames.forEach((name, i) => {
        const value = match![route.groups[i]!];
        if (value !== undefined) entries.push([name, value]);
      });
      const params: Record<string, string> = Object.fromEntries(entries);
      return { status: 200, template: route.template, method: headAsGet ? 'GET' : method, allow: '', autoOptions: false, headAsGet, params };
    }
    const allow = formatAllow(matching.flatMap((m) => [...m.route.methods]));
    if (allow === '') return { status: 404, template: null, method: null, allow, autoOptions: false, headAsGet: false, params: {} };
    const autoOptions = method === 'OPTIONS';
    return { status: autoOptions ? 200 : 405, template: null, method: null, allow, autoOptions, headAsGet: false, params: {} };
  }
}

function oracleRegex(template: ParsedTemplate): { pattern: RegExp; groups: number[] } {
  let source = '^/';
  const groups: number[] = [];
  let group = 1;
  for (const segment of template.segments) {
    source += segmentPattern(segment);
    if (segment.rank >= Rank.Dot) {
      groups.push(group);
      group += 1 + (segment.regex?.groupCount ?? 0);
    }
  }
  return { pattern: new RegExp(source + '/?$', LINEAR), groups };
}

function segmentPattern(s: Segment): string {
  switch (s.rank) {
    case Rank.Slash:
      return '/';
    case Rank.Literal:
      return s.text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
    case Rank.Dot:
      return '(?:\\.([^/]*))?';
    case Rank.Param:
      return '([^/]+)';
    case Rank.Regex:
      return `(${s.text})`;
    case Rank.Plus:
      return '([\\s\\S]*)';
  }
}
