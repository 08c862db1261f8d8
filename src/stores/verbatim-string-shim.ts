/**
 * Keeps node-redis from making every string method call of the worker slower.
 *
 * node-redis 5 declares `class VerbatimString extends String` (@redis/client, lib/RESP/verbatim-string.js),
 * for RESP3 verbatim-string replies. On Node 20 (V8 11.3), once any object has String.prototype as its
 * prototype, optimized code stops resolving `text.charCodeAt`, `text.indexOf`, ... on primitive strings
 * at compile time and goes through the generic load IC at every call: a loop of charCodeAt over a
 * 53-character path took 110 ns before `import 'redis'` and 585 ns after, in the same process; a worker
 * with a Redis rate limit spent about 3 µs of CPU per request in that IC (perf: Builtins_LoadIC called from
 * the path checks, the trie walk, the head serializer and parser, the access log), 7% of its request.
 * Object.create(String.prototype) alone does it; subclassing Array, Uint8Array or adding a property to
 * String.prototype does not.
 *
 * So the module is given, before node-redis loads it, a VerbatimString of the same shape that is not a
 * String subclass. The store speaks RESP2 and never receives a verbatim string, so node-redis never
 * builds one for it; the substitute still carries `format` and converts to its text like the original.
 * redis-store.ts imports this module first and checks afterwards that the substitute is what node-redis
 * uses ({@link shimInEffect}); when it is not (a node-redis that moved the file), the worker warns and
 * runs correctly, only slower.
 */
import { existsSync } from 'node:fs';
import Module, { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/** The stand-in: a plain object with the text and its format, as strings convert it. */
export class VerbatimString {
  readonly format: string;
  private readonly text: string;

  constructor(format: string, value: unknown) {
    this.format = format;
    this.text = String(value);
  }

  get length(): number {
    return this.text.length;
  }

  toString(): string {
    return this.text;
  }

  valueOf(): string {
    return this.text;
  }

  [Symbol.toPrimitive](): string {
    return this.text;
  }
}

export type ShimOutcome = 'installed' | 'already-loaded' | 'not-found';

/**
 * Puts the stand-in into the CommonJS cache under node-redis's module path (resolved from `from`, a
 * file or URL whose node_modules hold @redis/client). Must run before `redis` is first required.
 */
export function installVerbatimStringShim(from: string = import.meta.url): ShimOutcome {
  const require = createRequire(from);
  let file: string;
  try {
    file = join(dirname(require.resolve('@redis/client')), 'lib', 'RESP', 'verbatim-string.js');
  } catch {
    return 'not-found';
  }
  if (!existsSync(file)) return 'not-found';
  const cache = require.cache;
  if (cache[file] !== undefined) return cache[file]!.exports?.VerbatimString === VerbatimString ? 'installed' : 'already-loaded';
  const stand = new Module(file);
  stand.filename = file;
  stand.loaded = true;
  stand.exports = { VerbatimString };
  cache[file] = stand;
  return 'installed';
}

/** True when `verbatimString` (node-redis's export, once loaded) is not a String subclass. */
export function shimInEffect(verbatimString: unknown): boolean {
  return typeof verbatimString === 'function' && !(verbatimString.prototype instanceof String);
}

installVerbatimStringShim();
