import { compileSegmentRegex, type SegmentRegex } from './segment-regex.js';
import { Rank, type ParsedTemplate } from './template.js';

/**
 * One method's routing trie. Literal text (slashes included) is stored radix-style on edges, so the
 * static children of a node start with distinct characters and at most one of them can match; the
 * variable segments ({.x}, {x}, {x: re}, {+x}) are children of their own.
 *
 * Every template carries its position in the global specificity order (its "index"). A lookup looks
 * for the matching template with the smallest index, branch and bound: children are tried best-first
 * by the smallest index in their subtree, and a subtree that cannot beat the best match found so far
 * is skipped. That picks exactly what the first-match-in-sorted-order oracle picks (docs/reference/routing.md#specificity), while
 * touching only the few nodes along the path in practice.
 */
export const enum NodeKind {
  Static = 1,
  Dot = Rank.Dot,
  Param = Rank.Param,
  Regex = Rank.Regex,
  Plus = Rank.Plus,
}

const NONE = 0x7fffffff;
const SLASH = 0x2f;
/** Static children from which a node indexes them by character instead of scanning. */
const WIDE_NODE = 6;
/** Visits after which a lookup starts memoizing failed (node, position) pairs. */
const MEMO_AFTER_VISITS = 128;
/**
 * Work a single lookup may do before it gives up (TOO_COMPLEX). Real paths need tens of visits; the
 * budgets only bind on hostile paths built to make catch-alls and slash-spanning regexes try every
 * split, where the answer is a 400 rather than a worker stalled for everyone else.
 */
const VISIT_BUDGET = 200_000;
const REGEX_CHAR_BUDGET = 150_000;
/** lookup() result when a budget ran out. */
export const TOO_COMPLEX = -2;

export class TrieNode {
  id = 0;
  /** Static: the literal text this edge consumes. Others: "". */
  prefix: string;
  /** Where the prefix's character codes start in its trie's `prefixCodes` (set when the trie is made). */
  prefixAt = 0;
  /** Static children, by first character. */
  staticCodes: number[] = [];
  staticNodes: TrieNode[] = [];
  /** Variable children, best subtree first. */
  varNodes: TrieNode[] = [];
  /** Specificity index of the template ending here, NONE if none. */
  terminal = NONE;
  /** Route id of the template ending here, -1 if none. */
  routeId = -1;
  /** Smallest specificity index in this subtree. */
  minIndex = NONE;
  /** True when whatever follows this node must start with "/" (lets {x} jump to the segment end). */
  slashOnlyNext = false;
  /**
   * varNodes.length and prefix.length, kept as numbers by seal() for the lookup: reading them there
   * checked the array's and the string's kind at every step.
   */
  varCount = 0;
  prefixLength = 0;
  /**
   * The first character of the only static child, -1 without static children, -2 with several (set
   * by seal()): most nodes have one, and staticChild() then needs no array.
   */
  onlyCode = -1;
  onlyChild: TrieNode | null = null;

  constructor(readonly kind: NodeKind, prefix: string, readonly regex: SegmentRegex | null) {
    this.prefix = prefix;
  }

  /** For a wide node: ASCII code -> 1 + index into staticNodes (0 = none). Null for narrow nodes. */
  asciiIndex: Uint16Array | null = null;

  staticChild(code: number): TrieNode | undefined {
    const only = this.onlyCode;
    if (only !== -2) return only === code ? this.onlyChild! : undefined;
    const index = this.asciiIndex;
    if (index !== null && code < 128) {
      const slot = index[code]!;
      return slot === 0 ? undefined : this.staticNodes[slot - 1];
    }
    const codes = this.staticCodes;
    for (let i = 0; i < codes.length; i++) if (codes[i] === code) return this.staticNodes[i];
    return undefined;
  }

  /** Derive the lookup hints once the children are final. */
  seal(): void {
    this.varCount = this.varNodes.length;
    this.prefixLength = this.prefix.length;
    this.onlyCode = this.staticCodes.length === 0 ? -1 : this.staticCodes.length === 1 ? this.staticCodes[0]! : -2;
    this.onlyChild = this.staticNodes.length === 1 ? this.staticNodes[0]! : null;
    this.slashOnlyNext = this.varNodes.length === 0 && this.staticNodes.length > 0 && this.staticCodes.every((c) => c === SLASH);
    if (this.staticCodes.length >= WIDE_NODE) {
      const index = new Uint16Array(128);
      this.staticCodes.forEach((code, i) => {
        if (code < 128) index[code] = i + 1;
      });
      this.asciiIndex = index;
    }
  }
}

/**
 * Once every child is finished: the subtree's smallest index, children best-first, the lookup hints.
 * Both builders end with it: TrieBuilder, and RoutingTable.fromTransferable in a worker (where the
 * children already come best-first, and the sort keeps them so).
 */
export function finishNode(node: TrieNode): void {
  let min = node.terminal;
  for (const c of node.staticNodes) min = Math.min(min, c.minIndex);
  for (const c of node.varNodes) min = Math.min(min, c.minIndex);
  node.varNodes.sort((a, b) => a.minIndex - b.minIndex);
  node.minIndex = min;
  node.seal();
}

/** A template broken into what the trie stores: runs of literal text, and variable segments. */
type Token = string | { kind: NodeKind; regexSource: string };

function tokenize(template: ParsedTemplate): Token[] {
  const tokens: Token[] = [];
  let literal = '';
  for (const s of template.segments) {
    if (s.rank === Rank.Slash || s.rank === Rank.Literal) {
      literal += s.text;
      continue;
    }
    if (literal !== '') tokens.push(literal);
    literal = '';
    tokens.push({ kind: s.rank as number as NodeKind, regexSource: s.text });
  }
  if (literal !== '') tokens.push(literal);
  return tokens;
}

export class TrieBuilder {
  readonly root = new TrieNode(NodeKind.Static, '/', null);

  insert(template: ParsedTemplate, index: number, routeId: number): void {
    let node = this.root;
    for (const token of tokenize(template)) {
      node = typeof token === 'string' ? this.insertLiteral(node, token) : this.varChild(node, token.kind, token.regexSource);
    }
    node.terminal = index;
    node.routeId = routeId;
  }

  /**
   * Finish: number the nodes depth first (a parent before its children, as fromTransferable expects),
   * then, children before parents, order children best-first and derive the lookup hints. Iterative:
   * a trie is as deep as its longest template.
   */
  build(): Trie {
    const nodes: TrieNode[] = [];
    const stack: TrieNode[] = [this.root];
    while (stack.length > 0) {
      const node = stack.pop()!;
      node.id = nodes.length;
      nodes.push(node);
      for (let i = node.varNodes.length - 1; i >= 0; i--) stack.push(node.varNodes[i]!);
      for (let i = node.staticNodes.length - 1; i >= 0; i--) stack.push(node.staticNodes[i]!);
    }
    for (let id = nodes.length - 1; id >= 0; id--) finishNode(nodes[id]!);
    return new Trie(this.root, nodes);
  }

  private insertLiteral(parent: TrieNode, text: string): TrieNode {
    let node = parent;
    let rest = text;
    while (rest.length > 0) {
      const code = rest.charCodeAt(0);
      const slot = node.staticCodes.indexOf(code);
      if (slot === -1) {
        const leaf = new TrieNode(NodeKind.Static, rest, null);
        node.staticCodes.push(code);
        node.staticNodes.push(leaf);
        return leaf;
      }
      let child = node.staticNodes[slot]!;
      const common = commonPrefixLength(child.prefix, rest);
      if (common < child.prefix.length) {
        // Split the edge: the shared head becomes a node of its own, the old child hangs below it.
        const head = new TrieNode(NodeKind.Static, child.prefix.slice(0, common), null);
        child.prefix = child.prefix.slice(common);
        head.staticCodes.push(child.prefix.charCodeAt(0));
        head.staticNodes.push(child);
        node.staticNodes[slot] = head;
        child = head;
      }
      rest = rest.slice(common);
      node = child;
    }
    return node;
  }

  private varChild(parent: TrieNode, kind: NodeKind, regexSource: string): TrieNode {
    const found = parent.varNodes.find((c) => c.kind === kind && (kind !== NodeKind.Regex || c.regex!.source === regexSource));
    if (found) return found;
    const regex = kind === NodeKind.Regex ? (compileSegmentRegex(regexSource) as SegmentRegex) : null;
    const node = new TrieNode(kind, '', regex);
    parent.varNodes.push(node);
    return node;
  }
}

/**
 * `path.startsWith(node.prefix, pos)` for a node staticChild() picked by the character at `pos` (so from
 * the second character), by hand, against the prefix's character codes in one typed array of the trie:
 * comparing the edges' literal text was two thirds of a lookup in a 100-template table, and reading one
 * side from a Uint16Array instead of a second string took a 100-template lookup from about 220 to 170
 * ns, for tables compiled in place and tables rebuilt from their transferable form alike. The built-in
 * startsWith was no faster (edges are short; its generic path does not pay off here). One array for all
 * the nodes, not one per node, keeps a 10,000-template trie compact.
 */
function hasPrefixAt(path: string, codes: Uint16Array, node: TrieNode, pos: number): boolean {
  const n = node.prefixLength;
  if (pos + n > path.length) return false;
  const at = node.prefixAt;
  // From the second character: staticChild() found this node by the first.
  for (let i = 1; i < n; i++) if (path.charCodeAt(pos + i) !== codes[at + i]) return false;
  return true;
}

function commonPrefixLength(a: string, b: string): number {
  const max = Math.min(a.length, b.length);
  let i = 0;
  while (i < max && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

/**
 * A compiled trie plus the scratch state of one lookup at a time (a worker is single-threaded, so one
 * set of buffers serves every request without allocating).
 */
export class Trie {
  private path = '';
  private end = 0;
  private best = NONE;
  private bestRoute = -1;
  private visits = 0;
  private regexChars = 0;
  private exhausted = false;
  /** Capture stack: [start, end) per variable segment on the current branch; start -1 = absent. */
  private caps: Int32Array;
  private bestCaps: Int32Array;
  private bestDepth = 0;
  /** {+x} failure memo, generation-stamped so it needs no clearing: see visitPlus. */
  private generation = 0;
  private plusStamp: Uint32Array;
  private plusFailedFrom: Int32Array;
  /** General memo of failed (node, position) pairs, used once a lookup gets expensive. */
  private memo: Map<number, number> | null = null;
  private readonly memoStore = new Map<number, number>();

  /** Every static node's prefix as character codes, at its node's prefixAt. */
  private readonly prefixCodes: Uint16Array;

  constructor(readonly root: TrieNode, readonly nodes: readonly TrieNode[]) {
    let total = 0;
    for (const node of nodes) total += node.prefix.length;
    this.prefixCodes = new Uint16Array(total);
    let at = 0;
    for (const node of nodes) {
      node.prefixAt = at;
      for (let i = 0; i < node.prefix.length; i++) this.prefixCodes[at++] = node.prefix.charCodeAt(i);
    }
    const depth = maxDepth(root);
    this.caps = new Int32Array(2 * depth + 2);
    this.bestCaps = new Int32Array(2 * depth + 2);
    this.plusStamp = new Uint32Array(nodes.length);
    this.plusFailedFrom = new Int32Array(nodes.length);
  }

  /** The route id of the most specific matching template, or -1. `path` is normalized. */
  lookup(path: string): number {
    if (path.charCodeAt(0) !== SLASH || this.root.minIndex === NONE) return -1;
    this.path = path;
    this.end = path.length;
    this.best = NONE;
    this.bestRoute = -1;
    this.bestDepth = 0;
    this.visits = 0;
    this.regexChars = 0;
    this.exhausted = false;
    if (++this.generation === 0xffffffff) {
      this.plusStamp.fill(0);
      this.generation = 1;
    }
    try {
      this.visit(this.root, 1, 0);
    } catch (err) {
      // The search recurses once per branching node on the path. Templates are bounded in segments,
      // not in how their literal prefixes nest: /a{x}, /aa{x}, /aaa{x}, ... branch at every character,
      // and a long enough path then runs out of stack. Refused like a spent budget, not a thrown request.
      if (!(err instanceof RangeError)) throw err;
      this.exhausted = true;
    }
    if (this.memo !== null) {
      this.memo.clear();
      this.memo = null;
    }
    return this.exhausted ? TOO_COMPLEX : this.bestRoute;
  }

  /** Work done by the last lookup: what the budgets bound, and what tests of hostile input assert. */
  lastWork(): { visits: number; regexChars: number } {
    return { visits: this.visits, regexChars: this.regexChars };
  }

  /** Captures of the last successful lookup as [start, end) pairs, start -1 when absent. */
  captures(): { path: string; caps: Int32Array; count: number } {
    return { path: this.path, caps: this.bestCaps, count: this.bestDepth };
  }

  private visit(node: TrieNode, pos: number, depth: number): void {
    const path = this.path;
    for (;;) {
      if (node.minIndex >= this.best || this.exhausted) return;
      // Through nodes that only branch on literal text there is nothing to choose: walk, don't recurse
      // (past a template's end too, where the path does not end).
      while (node.varCount === 0 && (node.terminal === NONE || !this.canEndAt(pos))) {
        const child = pos < this.end ? node.staticChild(path.charCodeAt(pos)) : undefined;
        if (child === undefined || child.minIndex >= this.best || !hasPrefixAt(path, this.prefixCodes, child, pos)) return;
        pos += child.prefixLength;
        node = child;
      }
      let key = -1;
      if (++this.visits > MEMO_AFTER_VISITS) {
        if (this.visits > VISIT_BUDGET) {
          this.giveUp();
          return;
        }
        if (this.memo === null) this.memo = this.memoStore;
        key = node.id * (this.end + 1) + pos;
        const failedBelow = this.memo.get(key);
        if (failedBelow !== undefined && failedBelow >= this.best) return;
      }

      const code = pos < this.end ? path.charCodeAt(pos) : -1;
      const stat = code === -1 ? undefined : node.staticChild(code);
      // One way on: a single {x} up to the segment's end, no static child for this character, no
      // template that can end here. Step into it instead of recursing, as visitVar would, since nothing
      // is left to try here after it. With the walk past unreachable template ends above, the bench's
      // path is one visit() call instead of six (callgrind: 4,530 instructions a lookup before, 3,420 after).
      if (key === -1 && stat === undefined && node.varCount === 1 && (node.terminal === NONE || !this.canEndAt(pos))) {
        const v = node.varNodes[0]!;
        if (v.kind === NodeKind.Param && v.slashOnlyNext) {
          const segEnd = this.segmentEnd(pos);
          if (segEnd === pos) return;
          this.caps[2 * depth] = pos;
          this.caps[2 * depth + 1] = segEnd;
          node = v;
          pos = segEnd;
          depth++;
          continue;
        }
      }
      this.branch(node, pos, depth, stat, key);
      return;
    }
  }

  /** visit() where there is a choice: the static child, the variable children and the terminal, best first. */
  private branch(node: TrieNode, pos: number, depth: number, stat: TrieNode | undefined, key: number): void {
    const bestBefore = this.best;
    let staticPending = stat !== undefined;
    let terminalPending = node.terminal !== NONE;
    const vars = node.varNodes;
    for (let i = 0; i < node.varCount; i++) {
      const v = vars[i]!;
      if (staticPending && stat!.minIndex < v.minIndex) {
        staticPending = false;
        this.visitStatic(stat!, pos, depth);
      }
      if (terminalPending && node.terminal < v.minIndex) {
        terminalPending = false;
        this.acceptIfEnd(node, pos, depth);
      }
      if (v.minIndex >= this.best) break;
      this.visitVar(v, pos, depth);
    }
    if (staticPending) this.visitStatic(stat!, pos, depth);
    if (terminalPending) this.acceptIfEnd(node, pos, depth);

    if (key !== -1 && this.best === bestBefore) this.memo!.set(key, bestBefore);
  }

  private giveUp(): void {
    this.exhausted = true;
    this.best = -1; // prunes every branch still open
  }

  private visitStatic(node: TrieNode, pos: number, depth: number): void {
    if (node.minIndex < this.best && hasPrefixAt(this.path, this.prefixCodes, node, pos)) this.visit(node, pos + node.prefixLength, depth);
  }

  /** The oracle's regex ends in `/?$`: a template may end at the path's end or before one last "/". */
  private acceptIfEnd(node: TrieNode, pos: number, depth: number): void {
    if (node.terminal >= this.best) return;
    if (this.canEndAt(pos)) {
      this.best = node.terminal;
      this.bestRoute = node.routeId;
      for (let i = 0; i < 2 * depth; i++) this.bestCaps[i] = this.caps[i]!;
      this.bestDepth = depth;
    }
  }

  /** Whether a template may end at `pos`: at the path's end or before one last "/". */
  private canEndAt(pos: number): boolean {
    return pos === this.end || (pos === this.end - 1 && this.path.charCodeAt(pos) === SLASH);
  }

  /** Could anything below `node` start at `pos`? A cheap filter before trying a candidate split. */
  private canContinue(node: TrieNode, pos: number): boolean {
    if (node.varCount > 0) return true;
    const end = this.end;
    if (node.terminal !== NONE && (pos === end || (pos === end - 1 && this.path.charCodeAt(pos) === SLASH))) return true;
    return pos < end && node.staticCodes.indexOf(this.path.charCodeAt(pos)) !== -1;
  }

  private segmentEnd(pos: number): number {
    const slash = this.path.indexOf('/', pos);
    return slash === -1 ? this.end : slash;
  }

  private descend(node: TrieNode, start: number, stop: number, next: number, depth: number): void {
    this.caps[2 * depth] = start;
    this.caps[2 * depth + 1] = stop;
    this.visit(node, next, depth + 1);
  }

  // Candidate splits are tried longest first, as a backtracking regex would try them, so that among
  // the splits of one template the one found first carries the oracle's captures.
  private visitVar(node: TrieNode, pos: number, depth: number): void {
    switch (node.kind) {
      case NodeKind.Param: {
        const segEnd = this.segmentEnd(pos);
        if (segEnd === pos) return;
        if (node.slashOnlyNext) {
          this.descend(node, pos, segEnd, segEnd, depth);
          return;
        }
        for (let e = segEnd; e > pos && node.minIndex < this.best; e--) {
          if (this.canContinue(node, e)) this.descend(node, pos, e, e, depth);
        }
        return;
      }
      case NodeKind.Dot: {
        if (this.path.charCodeAt(pos) === 0x2e /* . */) {
          for (let e = this.segmentEnd(pos); e > pos && node.minIndex < this.best; e--) {
            if (this.canContinue(node, e)) this.descend(node, pos + 1, e, e, depth);
          }
        }
        if (node.minIndex < this.best && this.canContinue(node, pos)) this.descend(node, -1, -1, pos, depth);
        return;
      }
      case NodeKind.Plus:
        this.visitPlus(node, pos, depth);
        return;
      case NodeKind.Regex: {
        const regex = node.regex!;
        const limit = regex.canSpanSlash ? this.end : this.segmentEnd(pos);
        for (let e = limit; e >= pos && node.minIndex < this.best; e--) {
          if (!this.canContinue(node, e)) continue;
          this.regexChars += e - pos + 1;
          if (this.regexChars > REGEX_CHAR_BUDGET) {
            this.giveUp();
            return;
          }
          if (regex.whole.test(this.path.slice(pos, e))) this.descend(node, pos, e, e, depth);
        }
        return;
      }
    }
  }

  /**
   * A failed {+x} from `pos` has shown that no split at `pos` or later leads anywhere (the bound only
   * tightens during a lookup), so a later visit from an earlier position tries only the splits before
   * `pos`. Each {+x} node then tries each position at most once per lookup: `/{+a}/{+b}/{+c}/x` stays
   * linear in the path length instead of cubic.
   */
  private visitPlus(node: TrieNode, pos: number, depth: number): void {
    const id = node.id;
    const known = this.plusStamp[id] === this.generation;
    if (known && pos >= this.plusFailedFrom[id]!) return;
    const bestBefore = this.best;
    const upper = known ? this.plusFailedFrom[id]! - 1 : this.end;
    for (let e = upper; e >= pos && node.minIndex < this.best; e--) {
      if (this.canContinue(node, e)) this.descend(node, pos, e, e, depth);
      if (this.exhausted) return;
    }
    if (this.best === bestBefore) {
      this.plusFailedFrom[id] = pos;
      this.plusStamp[id] = this.generation;
    }
  }
}

/** The most variable segments on any path from `root` (iterative: a trie is as deep as its longest template). */
function maxDepth(root: TrieNode): number {
  let deepest = 0;
  const nodes: TrieNode[] = [root];
  const depths: number[] = [0];
  while (nodes.length > 0) {
    const node = nodes.pop()!;
    const depth = depths.pop()!;
    if (depth > deepest) deepest = depth;
    for (const child of node.staticNodes) {
      nodes.push(child);
      depths.push(depth);
    }
    for (const child of node.varNodes) {
      nodes.push(child);
      depths.push(depth + 1);
    }
  }
  return deepest;
}
