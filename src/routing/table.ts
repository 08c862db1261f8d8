import { formatAllow } from './methods.js';
import { NegotiationCacheBudget, TargetNegotiation } from './negotiate.js';
import { compareSpecificity } from './specificity.js';
import { compileSegmentRegex, type SegmentRegex } from './segment-regex.js';
import { parseTemplate, shortestMatchLength, TemplateSyntaxError, type ParsedTemplate } from './template.js';
import { DEFAULT_MAX_URL_BYTES } from '../edge/request-line.js';
import { finishNode, NodeKind, TOO_COMPLEX, Trie, TrieBuilder, TrieNode } from './trie.js';
import type { RouteEntry, RouteTarget, TemplateProblem } from './types.js';
import { printable } from '../text/printable.js';

export type { RouteTarget } from './types.js';

/** An equivalence group: every endpoint with the same method and canonical template. */
export interface Route {
  /** Dense index in specificity order, stable for the life of one compiled table. */
  readonly id: number;
  readonly method: string;
  /** The template as first declared (the endpoint's name in metrics and logs). */
  readonly template: string;
  readonly canonical: string;
  readonly targets: readonly RouteTarget[];
  readonly paramNames: readonly string[];
  /** CompileOptions.hostSet of its table: '' in the full table. */
  readonly hostSet: string;
}

export interface Selection {
  /**
   * 200 (route chosen, or automatic OPTIONS), 404, 405, 406, 415, or 400 when the path is so hostile
   * that routing it would exceed the lookup's work budget (see src/routing/trie.ts).
   */
  status: number;
  route: Route | null;
  /** Targets left after Content-Type / Accept negotiation (a subset of route.targets). */
  targets: readonly RouteTarget[];
  /** The Allow header value for 405 and automatic OPTIONS, e.g. "GET, HEAD, OPTIONS"; "" otherwise. */
  allow: string;
  /** True when OPTIONS was answered automatically (no declared OPTIONS endpoint): reply 200 + Allow. */
  autoOptions: boolean;
  /** True when HEAD is served by the GET endpoint: forward upstream as GET and drop the response body. */
  headAsGet: boolean;
}

export function emptySelection(): Selection {
  return { status: 404, route: null, targets: [], allow: '', autoOptions: false, headAsGet: false };
}

export interface CompileOptions {
  /**
   * Names each route's id (a table compiled from part of another keeps that one's ids, so per-route
   * state keyed by id stays shared; see src/edge/host-routes.ts). The trie indexes routes by their
   * position either way.
   */
  idOf?: (method: string, canonical: string) => number;
  /** limits.maxUrlBytes: a template whose every match is longer is refused (no request could reach it). */
  maxUrlBytes?: number;
  /**
   * Names the set of upstreams a virtual host's table routes among (src/edge/host-routes.ts); every
   * route carries it. What is kept per endpoint and must not pass from one host set to another (the
   * response cache's entries, rate-limit buckets) is kept apart by it.
   */
  hostSet?: string;
}

interface CompiledRoute extends Route {
  readonly negotiation: TargetNegotiation;
}

/**
 * The compiled table's plain-data form: JSON- and structured-clone-safe, so the primary can compile
 * and each worker rebuild without parsing or sorting a template again.
 */
export interface TransferableTable {
  readonly version: 1;
  readonly entryCount: number;
  /** [method, template, canonical, paramNames, targets] per route, in id order. */
  readonly routes: ReadonlyArray<readonly [string, string, string, readonly string[], readonly TransferableTarget[]]>;
  /** Per method: its trie's nodes in id order (id 0 is the root). */
  readonly tries: Readonly<Record<string, readonly TransferableNode[]>>;
}
type TransferableTarget = readonly [string, string, readonly string[], readonly string[], readonly string[], readonly string[]];
/** [kind, prefix, regexSource, terminal, routeId, staticChildIds, varChildIds] */
type TransferableNode = readonly [number, string, string, number, number, readonly number[], readonly number[]];

const SHARED_EMPTY: readonly RouteTarget[] = [];

export class RoutingTable {
  private lastTrie: Trie | null = null;
  private lastSearched: Trie | null = null;
  private lastRoute: CompiledRoute | null = null;

  /**
   * The tries' methods and the tries, GET first: find() compares the request's method with each
   * instead of a Map lookup, which hashes the method string uWS makes anew for every request
   * (callgrind: -300 instructions a request).
   */
  private readonly methods: readonly string[];
  private readonly trieList: readonly Trie[];

  private constructor(
    private readonly compiledRoutes: readonly CompiledRoute[],
    private readonly tries: ReadonlyMap<string, Trie>,
    readonly size: number,
  ) {
    const methods = [...tries.keys()].sort((a, b) => (a === 'GET' ? -1 : b === 'GET' ? 1 : 0));
    this.methods = methods;
    this.trieList = methods.map((m) => tries.get(m)!);
  }

  static compile(entries: readonly RouteEntry[], options: CompileOptions = {}): { table: RoutingTable; problems: TemplateProblem[] } {
    const { idOf, maxUrlBytes = DEFAULT_MAX_URL_BYTES, hostSet = '' } = options;
    const problems: TemplateProblem[] = [];
    const parsed = new Map<string, ParsedTemplate>();
    const groups = new Map<string, { method: string; template: ParsedTemplate; targets: RouteTarget[] }>();
    let accepted = 0;
    for (const entry of entries) {
      const method = entry.method.toUpperCase();
      const problem = (why: string): void => {
        const reason = printable(why);
        problems.push({ upstream: entry.upstream, method, template: entry.template, reason, message: printable(`upstream ${entry.upstream}: template ${shown(entry.template)} (${method}): ${reason}`) });
      };
      if (!/^[!#$%&'*+.^_`|~0-9A-Z-]+$/.test(method)) {
        problem(`"${entry.method}" is not an HTTP method`);
        continue;
      }
      let template = parsed.get(entry.template);
      if (template === undefined) {
        try {
          template = parseTemplate(entry.template);
        } catch (e) {
          if (!(e instanceof TemplateSyntaxError)) throw e;
          problem(e.reason);
          continue;
        }
        const shortest = shortestMatchLength(template);
        if (shortest > maxUrlBytes) {
          problem(`no request can match it: its shortest match is ${shortest} bytes, longer than limits.maxUrlBytes (${maxUrlBytes})`);
          continue;
        }
        parsed.set(entry.template, template);
      }
      const key = `${method} ${template.canonical}`;
      let group = groups.get(key);
      if (group === undefined) {
        group = { method, template, targets: [] };
        groups.set(key, group);
      }
      const twin = group.targets.find((t) => t.upstream === entry.upstream);
      if (twin) {
        problem(`equivalent to "${twin.template}", which this upstream already declares for ${method}; ignored`);
        continue;
      }
      group.targets.push(toTarget(entry));
      accepted++;
    }

    const ordered = [...groups.values()].sort(
      (a, b) => compareSpecificity(a.template, b.template) || (a.method < b.method ? -1 : a.method > b.method ? 1 : 0),
    );
    const budget = new NegotiationCacheBudget();
    const routes = ordered.map((g, id): CompiledRoute => newRoute(idOf === undefined ? id : idOf(g.method, g.template.canonical), g.method, g.template.raw, g.template.canonical, g.template.paramNames, g.targets, budget, hostSet));

    // Specificity index: equal for equivalent templates, whatever their method.
    const builders = new Map<string, TrieBuilder>();
    let index = -1;
    let previous: ParsedTemplate | null = null;
    ordered.forEach((g, id) => {
      if (previous === null || compareSpecificity(previous, g.template) !== 0) index++;
      previous = g.template;
      let builder = builders.get(g.method);
      if (builder === undefined) builders.set(g.method, (builder = new TrieBuilder()));
      builder.insert(g.template, index, id);
    });
    const tries = new Map([...builders].map(([method, b]) => [method, b.build()] as const));
    return { table: new RoutingTable(routes, tries, accepted), problems };
  }

  static fromTransferable(data: TransferableTable): RoutingTable {
    if (data?.version !== 1) throw new Error(`unsupported routing table version ${String(data?.version)}`);
    const budget = new NegotiationCacheBudget();
    const routes = data.routes.map(([method, template, canonical, paramNames, targets], id) =>
      newRoute(id, method, template, canonical, paramNames, targets.map(fromTransferableTarget), budget),
    );
    const regexes = new Map<string, SegmentRegex>();
    const tries = new Map<string, Trie>();
    for (const [method, nodes] of Object.entries(data.tries)) {
      const built = nodes.map(([kind, prefix, regexSource, terminal, routeId]) => {
        let regex: SegmentRegex | null = null;
        if (kind === NodeKind.Regex) {
          regex = regexes.get(regexSource) ?? null;
          if (regex === null) {
            const compiled = compileSegmentRegex(regexSource);
            if (typeof compiled === 'string') throw new Error(`routing table regex "${regexSource}": ${compiled}`);
            regexes.set(regexSource, (regex = compiled));
          }
        }
        const node = new TrieNode(kind as NodeKind, prefix, regex);
        node.terminal = terminal;
        node.routeId = routeId;
        return node;
      });
      nodes.forEach(([, , , , , staticIds, varIds], id) => {
        const node = built[id]!;
        node.id = id;
        node.staticNodes = staticIds.map((c) => built[c]!);
        node.staticCodes = node.staticNodes.map((c) => c.prefix.charCodeAt(0));
        node.varNodes = varIds.map((c) => built[c]!);
      });
      // Children come after their parent in id order, so a backward pass sees every subtree finished.
      for (let id = built.length - 1; id >= 0; id--) finishNode(built[id]!);
      tries.set(method, new Trie(built[0]!, built));
    }
    return new RoutingTable(routes, tries, data.entryCount);
  }

  toTransferable(): TransferableTable {
    const tries: Record<string, TransferableNode[]> = {};
    for (const [method, trie] of this.tries) {
      tries[method] = trie.nodes.map((n) => [
        n.kind,
        n.prefix,
        n.regex?.source ?? '',
        n.terminal,
        n.routeId,
        n.staticNodes.map((c) => c.id),
        n.varNodes.map((c) => c.id),
      ]);
    }
    return {
      version: 1,
      entryCount: this.size,
      routes: this.compiledRoutes.map((r) => [r.method, r.template, r.canonical, r.paramNames, r.targets.map(toTransferableTarget)]),
      tries,
    };
  }

  /** Routes (equivalence groups) in specificity order. */
  routes(): readonly Route[] {
    return this.compiledRoutes;
  }

  /**
   * Select the endpoint group for a request. `path` must be normalized (src/http/normalize-path.ts).
   * `out` is filled and returned; pass a reused object on the hot path to avoid allocation.
   */
  select(
    method: string,
    path: string,
    contentType: string | undefined,
    accept: string | undefined,
    hasBody: boolean,
    out: Selection = emptySelection(),
  ): Selection {
    out.route = null;
    out.targets = SHARED_EMPTY;
    out.allow = '';
    out.autoOptions = false;
    out.headAsGet = false;
    this.lastRoute = null;

    let id = this.find(method, path);
    if (id === -1 && method === 'HEAD') {
      id = this.find('GET', path);
      out.headAsGet = id !== -1;
    }
    if (id === TOO_COMPLEX) {
      out.headAsGet = false;
      out.status = 400;
      return out;
    }
    if (id === -1) {
      const allow = this.allowedMethods(path);
      if (allow === TOO_COMPLEX) out.status = 400;
      else if ((out.allow = allow) === '') out.status = 404;
      else if (method === 'OPTIONS') {
        out.status = 200;
        out.autoOptions = true;
      } else out.status = 405;
      return out;
    }
    const route = this.compiledRoutes[id]!;
    this.lastRoute = route;
    out.route = route;
    const targets = route.negotiation.filter(contentType, accept, hasBody);
    out.targets = targets;
    out.status = targets.length > 0 ? 200 : route.negotiation.rejectionStatus(contentType, hasBody);
    return out;
  }

  /** Parameter values of the last successful select(), as routed (still percent-encoded). */
  params(): Record<string, string> {
    if (this.lastTrie === null || this.lastRoute === null) return {};
    const { path, caps, count } = this.lastTrie.captures();
    const names = this.lastRoute.paramNames;
    // Entries, not assignments: a parameter may be named "__proto__".
    const entries: Array<[string, string]> = [];
    for (let i = 0; i < count; i++) {
      if (caps[2 * i]! >= 0) entries.push([names[i]!, path.slice(caps[2 * i], caps[2 * i + 1])]);
    }
    return Object.fromEntries(entries);
  }

  /** Work of the last trie lookup select() made (diagnostics and tests). */
  lastLookupWork(): { visits: number; regexChars: number } {
    return this.lastSearched?.lastWork() ?? { visits: 0, regexChars: 0 };
  }

  /** The route id the method's trie picks for `path`, -1 for none, or TOO_COMPLEX. */
  private find(method: string, path: string): number {
    const trie = this.trieFor(method);
    if (trie === null) return -1;
    this.lastSearched = trie;
    const id = trie.lookup(path);
    if (id >= 0) this.lastTrie = trie;
    return id;
  }

  private trieFor(method: string): Trie | null {
    const methods = this.methods;
    for (let i = 0; i < methods.length; i++) if (methods[i] === method) return this.trieList[i]!;
    return null;
  }

  /** The slow path of a miss: which methods would have matched this path (405 / OPTIONS / 404). */
  private allowedMethods(path: string): string | typeof TOO_COMPLEX {
    const methods: string[] = [];
    this.lastRoute = null;
    for (const [method, trie] of this.tries) {
      const id = trie.lookup(path);
      if (id === TOO_COMPLEX) return TOO_COMPLEX;
      if (id !== -1) methods.push(method);
    }
    return formatAllow(methods);
  }
}

function newRoute(
  id: number,
  method: string,
  template: string,
  canonical: string,
  paramNames: readonly string[],
  targets: readonly RouteTarget[],
  budget: NegotiationCacheBudget,
  hostSet = '',
): CompiledRoute {
  return { id, method, template, canonical, paramNames, targets, hostSet, negotiation: new TargetNegotiation(targets, budget) };
}

/**
 * A template as a message shows it: escaped (printable: a doc's template may hold control characters),
 * and cut, since one refused for its size can be many kilobytes (the problem's `template` keeps it whole).
 */
function shown(template: string): string {
  return template.length <= 200 ? `"${printable(template)}"` : `"${printable(template.slice(0, 200))}…" (${template.length} characters)`;
}

function toTarget(entry: RouteEntry): RouteTarget {
  return {
    upstream: entry.upstream,
    template: entry.template,
    // Parameters (charset=…) never decide whether a body is consumable; keep type/subtype only.
    consumes: entry.consumes.map((t) => t.split(';')[0]!.trim().toLowerCase()).filter((t) => t !== ''),
    produces: entry.produces.filter((t) => t.trim() !== ''),
    disabledMiddleware: entry.disabledMiddleware,
    disabledListeners: entry.disabledListeners,
  };
}

function toTransferableTarget(t: RouteTarget): TransferableTarget {
  return [t.upstream, t.template, t.consumes, t.produces, t.disabledMiddleware, t.disabledListeners];
}

function fromTransferableTarget([upstream, template, consumes, produces, disabledMiddleware, disabledListeners]: TransferableTarget): RouteTarget {
  return { upstream, template, consumes, produces, disabledMiddleware, disabledListeners };
}
