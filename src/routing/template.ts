import { compileSegmentRegex, LINEAR, type SegmentRegex } from './segment-regex.js';
import { normalizeLiteral } from '../http/normalize-path.js';
import { sendableText } from '../http/request-target.js';

/**
 * Segment kinds, numbered by rank (docs/reference/routing.md#segment-forms): a lower rank is more specific.
 */
export const enum Rank {
  Slash = 0,
  Literal = 1,
  Dot = 2,
  Param = 3,
  Regex = 4,
  Plus = 5,
}

export interface Segment {
  readonly rank: Rank;
  /** Literal text (Literal), trimmed regex source (Regex), "/" (Slash), "" otherwise. */
  readonly text: string;
  /** Identifier; never counts for specificity or equivalence. */
  readonly name: string;
  readonly regex: SegmentRegex | null;
}

export interface ParsedTemplate {
  readonly raw: string;
  readonly segments: readonly Segment[];
  readonly ranks: readonly Rank[];
  /** The identity of the template: identifiers erased (docs/reference/routing.md#specificity, rule 3). */
  readonly canonical: string;
  /** Names of the variable segments, in order. */
  readonly paramNames: readonly string[];
}

/**
 * The most path segments, and the most variable segments, one template may have
 * (docs/reference/routing.md#path-templates). A lookup walks a template's segments recursively, so this
 * bounds the stack a request's routing needs.
 */
export const MAX_TEMPLATE_SEGMENTS = 256;

export class TemplateSyntaxError extends Error {
  constructor(readonly template: string, readonly reason: string) {
    super(`template "${template}": ${reason}`);
    this.name = 'TemplateSyntaxError';
  }
}

const SLASH: Segment = { rank: Rank.Slash, text: '/', name: '', regex: null };

/** Operators of RFC 6570 that are read as (docs/reference/routing.md#segment-forms) a plain `{name}`. */
const PLAIN_OPERATORS = '?#;&/';

export function parseTemplate(raw: string): ParsedTemplate {
  const body = stripSlashes(raw);
  const segments: Segment[] = [];
  let i = 0;
  while (i < body.length) {
    const c = body.charCodeAt(i);
    if (c === 0x2f /* / */) {
      segments.push(SLASH);
      i++;
    } else if (c === 0x7b /* { */) {
      const close = findClosingBrace(raw, body, i);
      segments.push(parseExpression(raw, body.slice(i + 1, close)));
      i = close + 1;
    } else if (c === 0x7d /* } */) {
      throw new TemplateSyntaxError(raw, `unbalanced braces: "}" at offset ${i} closes nothing`);
    } else {
      let end = i + 1;
      while (end < body.length && !isLiteralStop(body.charCodeAt(end))) end++;
      const normalized = normalizeLiteral(body.slice(i, end));
      if (normalized === null) throw new TemplateSyntaxError(raw, `invalid percent-encoding in "${body.slice(i, end)}"`);
      // normalizeLiteral escaped the visible ASCII a path holds only escaped (`"` `<` ...), as path
      // normalization does; sendableText escapes what no request target holds raw (`é`, `#`).
      segments.push({ rank: Rank.Literal, text: sendableText(normalized), name: '', regex: null });
      i = end;
    }
  }
  checkSize(raw, segments);
  checkRegexesCombine(raw, segments);
  return {
    raw,
    segments,
    ranks: segments.map((s) => s.rank),
    canonical: segments.map(canonicalSegment).join(''),
    paramNames: segments.filter((s) => s.rank >= Rank.Dot).map((s) => s.name),
  };
}

export function canonicalSegment(s: Segment): string {
  switch (s.rank) {
    case Rank.Slash:
      return '/';
    case Rank.Literal:
      return s.text;
    case Rank.Dot:
      return '{.}';
    case Rank.Param:
      return '{}';
    case Rank.Regex:
      return `{:${s.text}}`;
    case Rank.Plus:
      return '{+}';
  }
}

function checkSize(raw: string, segments: readonly Segment[]): void {
  let slashes = 0;
  let variables = 0;
  for (const s of segments) {
    if (s.rank === Rank.Slash) slashes++;
    else if (s.rank >= Rank.Dot) variables++;
  }
  if (slashes + 1 > MAX_TEMPLATE_SEGMENTS) throw new TemplateSyntaxError(raw, `${slashes + 1} path segments; at most ${MAX_TEMPLATE_SEGMENTS} are routed`);
  if (variables > MAX_TEMPLATE_SEGMENTS) throw new TemplateSyntaxError(raw, `${variables} variable segments; at most ${MAX_TEMPLATE_SEGMENTS} are routed`);
}

/**
 * The length of the shortest normalized path the template matches: its literal text and slashes, and
 * one character per `{name}` (the other forms may match nothing).
 */
export function shortestMatchLength(template: ParsedTemplate): number {
  let length = 1;
  for (const s of template.segments) {
    if (s.rank === Rank.Slash || s.rank === Rank.Literal) length += s.text.length;
    else if (s.rank === Rank.Param) length++;
  }
  return length;
}

/** Two regex segments may clash once joined (e.g. the same named group twice): refuse that here. */
function checkRegexesCombine(raw: string, segments: readonly Segment[]): void {
  const sources = segments.filter((s) => s.rank === Rank.Regex).map((s) => `(${s.text})`);
  if (sources.length < 2) return;
  try {
    new RegExp(sources.join(''), LINEAR);
  } catch (e) {
    throw new TemplateSyntaxError(raw, `its regexes do not compile together: ${(e as Error).message}`);
  }
}

function stripSlashes(raw: string): string {
  let start = 0;
  let end = raw.length;
  while (start < end && raw.charCodeAt(start) === 0x2f) start++;
  while (end > start && raw.charCodeAt(end - 1) === 0x2f) end--;
  return raw.slice(start, end);
}

function isLiteralStop(c: number): boolean {
  return c === 0x2f || c === 0x7b || c === 0x7d;
}

/** Braces nest (regexes use `{m,n}`); a backslash-escaped brace does not count. */
function findClosingBrace(raw: string, body: string, open: number): number {
  let depth = 0;
  for (let j = open; j < body.length; j++) {
    const c = body.charCodeAt(j);
    if (c === 0x5c /* \ */) {
      j++;
    } else if (c === 0x7b) {
      depth++;
    } else if (c === 0x7d && --depth === 0) {
      return j;
    }
  }
  throw new TemplateSyntaxError(raw, `unbalanced braces: "{" at offset ${open} is never closed`);
}

function parseExpression(raw: string, expr: string): Segment {
  const op = expr.charAt(0);
  if (op === '+' || op === '.' || PLAIN_OPERATORS.includes(op)) {
    const name = expr.slice(1).trim();
    if (name.includes(':')) {
      throw new TemplateSyntaxError(raw, `"{${expr}}": a regex cannot follow the "${op}" operator`);
    }
    if (op === '+') return { rank: Rank.Plus, text: '', name, regex: null };
    if (op === '.') return { rank: Rank.Dot, text: '', name, regex: null };
    return { rank: Rank.Param, text: '', name, regex: null };
  }
  const colon = expr.indexOf(':');
  if (colon === -1) return { rank: Rank.Param, text: '', name: expr.trim(), regex: null };
  const name = expr.slice(0, colon).trim();
  const source = expr.slice(colon + 1).trim();
  if (source === '') throw new TemplateSyntaxError(raw, `"{${expr}}": empty regex`);
  const compiled = compileSegmentRegex(source);
  if (typeof compiled === 'string') throw new TemplateSyntaxError(raw, `"{${expr}}": ${compiled}`);
  return { rank: Rank.Regex, text: source, name, regex: compiled };
}
