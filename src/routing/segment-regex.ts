import { setFlagsFromString } from 'node:v8';
import regjsparser from 'regjsparser';

/**
 * Template regexes come from upstream docs, that is from outside. A backtracking engine would let one
 * bad pattern stall a worker, so every template regex runs on V8's linear-time engine (the `l` flag,
 * enabled below). Constructs that engine cannot run (backreferences, lookaround) are refused, and so
 * are assertions that look past the segment (`^`, `$`, `\b`, `\B`): a segment must match the same
 * text whatever its neighbours are, or no structure faster than one big regex could pick the same
 * endpoint as the oracle (docs/reference/routing.md#specificity).
 */
export interface SegmentRegex {
  readonly source: string;
  /** Matches a whole candidate slice: `^(?:source)$`. */
  readonly whole: RegExp;
  /** False when the regex can never match "/", so its candidates stop at the next slash. */
  readonly canSpanSlash: boolean;
  /** Capturing groups inside the source (the oracle offsets its own groups by this). */
  readonly groupCount: number;
}

const LINEAR_FLAG = '--enable-experimental-regexp-engine';
setFlagsFromString(LINEAR_FLAG);

export const linearEngineAvailable: boolean = (() => {
  try {
    new RegExp('a', 'l');
    return true;
  } catch {
    return false;
  }
})();

/** Flags for every regex built from template regexes (segment and oracle alike). */
export const LINEAR = linearEngineAvailable ? 'l' : '';

/** Returns the compiled regex, or the reason it is refused. */
export function compileSegmentRegex(source: string): SegmentRegex | string {
  if (!linearEngineAvailable) {
    return `regex templates need V8's linear-time engine (${LINEAR_FLAG}), which this runtime lacks`;
  }
  let ast: Node;
  try {
    ast = regjsparser.parse(source, '', { namedGroups: true, lookbehind: true, unicodePropertyEscape: false }) as unknown as Node;
  } catch (e) {
    return `regex does not compile: ${(e as Error).message.split('\n')[0]}`;
  }
  const refused = findRefusedConstruct(ast);
  if (refused !== null) return `regex uses ${refused}, which is not allowed in a template`;
  let whole: RegExp;
  try {
    whole = new RegExp(`^(?:${source})$`, LINEAR);
  } catch (e) {
    return `regex does not compile: ${(e as Error).message}`;
  }
  return { source, whole, canSpanSlash: mayMatchSlash(ast), groupCount: countGroups(ast) };
}

/** regjsparser's AST, read loosely: only `type`, `body` and a few per-type fields are used. */
type Node = { type: string; body?: unknown } & Record<string, unknown>;

function children(node: Node): Node[] {
  const body = (node as { body?: unknown }).body;
  if (Array.isArray(body)) return body as Node[];
  if (body && typeof body === 'object') return [body as Node];
  return [];
}

function findRefusedConstruct(node: Node): string | null {
  switch (node.type) {
    case 'anchor':
      return node.kind === 'boundary' || node.kind === 'not-boundary' ? 'a word boundary (\\b, \\B)' : 'an anchor (^, $)';
    case 'reference':
      return 'a backreference';
    case 'group':
      if (node.behavior !== 'normal' && node.behavior !== 'ignore') return 'lookaround';
      break;
  }
  for (const child of children(node)) {
    const found = findRefusedConstruct(child);
    if (found !== null) return found;
  }
  return null;
}

function countGroups(node: Node): number {
  let n = node.type === 'group' && node.behavior === 'normal' ? 1 : 0;
  for (const child of children(node)) n += countGroups(child);
  return n;
}

const SLASH = 0x2f;

/** Conservative: true unless the regex provably never matches "/". */
function mayMatchSlash(node: Node): boolean {
  switch (node.type) {
    case 'value':
      return node.codePoint === SLASH;
    case 'dot':
      return true;
    case 'characterClassEscape':
      return node.value === 'S' || node.value === 'W' || node.value === 'D';
    case 'characterClass': {
      // Negated: it may match "/" unless a member surely covers "/"; plain: if a member may cover it.
      if (node.negative) return !children(node).some((m) => classMemberCoversSlash(m, false));
      return children(node).some((m) => classMemberCoversSlash(m, true));
    }
    case 'alternative':
    case 'disjunction':
    case 'group':
    case 'quantifier':
      return children(node).some(mayMatchSlash);
    default:
      return true;
  }
}

function classMemberCoversSlash(node: Node, whenUnsure: boolean): boolean {
  switch (node.type) {
    case 'value':
      return node.codePoint === SLASH;
    case 'characterClassRange': {
      const { min, max } = node as unknown as { min: { codePoint: number }; max: { codePoint: number } };
      return min.codePoint <= SLASH && SLASH <= max.codePoint;
    }
    case 'characterClassEscape':
      return node.value === 'S' || node.value === 'W' || node.value === 'D';
    default:
      return whenUnsure;
  }
}
