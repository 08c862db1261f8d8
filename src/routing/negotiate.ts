import { acceptedMediaTypes } from '../http/accept-media-types.js';
import { contentTypeMatches, prepareShorthands } from '../http/content-type-match.js';
import type { RouteTarget } from './types.js';

/**
 * Content negotiation among equivalent endpoints (docs/reference/routing.md#content-negotiation-415-406): keep the targets that consume
 * the request's Content-Type, then those that produce something Accept allows (q-values honoured).
 * Content-Type is matched by http/content-type-match.ts (type-is's answers), Accept by http/accept-media-types.ts; results are cached per route by header
 * value, so a steady stream of identical headers costs two Map lookups and no allocation.
 *
 * The header values are the client's: the cache is bounded in bytes for the whole table (see
 * NegotiationCacheBudget), and values longer than MAX_CACHED_CHARS are never cached (computed per
 * request), so a client sending endless distinct values cannot grow a worker.
 */
const CACHE_LIMIT = 256;
const NO_BODY = '\u0000no-body';
const ANY = '\u0000any';
/** Longer Content-Type or Accept values are negotiated per request and never kept. */
export const MAX_CACHED_CHARS = 512;
/** What one table's negotiation caches may hold, counting 2 bytes per key character plus entry overhead. */
export const NEGOTIATION_CACHE_BYTES = 2 * 1024 * 1024;
const ENTRY_OVERHEAD_BYTES = 128;

/**
 * The byte budget of one routing table's negotiation caches. When a new entry would pass it, every
 * cache of the table is emptied (a rare event outside an attack; the next requests fill them again).
 */
export class NegotiationCacheBudget {
  private used = 0;
  private readonly holders = new Set<TargetNegotiation>();

  constructor(readonly maxBytes = NEGOTIATION_CACHE_BYTES) {}

  get usedBytes(): number {
    return this.used;
  }

  charge(holder: TargetNegotiation, bytes: number): void {
    if (this.used + bytes > this.maxBytes) {
      for (const cached of this.holders) cached.clearCache();
      this.holders.clear();
      this.used = 0;
    }
    this.used += bytes;
    this.holders.add(holder);
  }
}

export class TargetNegotiation {
  private readonly cache = new Map<string, Map<string, readonly RouteTarget[]>>();
  private readonly checksConsumes: boolean;
  private readonly checksProduces: boolean;

  constructor(
    private readonly targets: readonly RouteTarget[],
    private readonly budget: NegotiationCacheBudget,
  ) {
    this.checksConsumes = targets.some((t) => t.consumes.length > 0);
    // A shorthand like `json` loads type-is and mime-db now, at table install, not on a first request.
    for (const t of targets) prepareShorthands(t.consumes);
    this.checksProduces = targets.some((t) => t.produces.length > 0);
  }

  get trivial(): boolean {
    return !this.checksConsumes && !this.checksProduces;
  }

  /** Targets left for this request; empty means 415 or 406 (see `rejectionStatus`). */
  filter(contentType: string | undefined, accept: string | undefined, hasBody: boolean): readonly RouteTarget[] {
    if (this.trivial) return this.targets;
    const ctKey = !this.checksConsumes || !hasBody ? NO_BODY : (contentType ?? '');
    const acceptKey = !this.checksProduces || accept === undefined || accept === '' ? ANY : accept;
    if (ctKey.length > MAX_CACHED_CHARS || acceptKey.length > MAX_CACHED_CHARS) return this.compute(ctKey, acceptKey);
    let byAccept = this.cache.get(ctKey);
    let result = byAccept?.get(acceptKey);
    if (result !== undefined) return result;
    result = this.compute(ctKey, acceptKey);
    // Charged first: it may empty this cache too.
    this.budget.charge(this, 2 * (ctKey.length + acceptKey.length) + ENTRY_OVERHEAD_BYTES);
    byAccept = this.cache.get(ctKey);
    if (byAccept === undefined) {
      if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
      byAccept = new Map();
      this.cache.set(ctKey, byAccept);
    }
    if (byAccept.size >= CACHE_LIMIT) byAccept.clear();
    byAccept.set(acceptKey, result);
    return result;
  }

  /** Entries held (diagnostics and tests). */
  cachedEntries(): number {
    let n = 0;
    for (const byAccept of this.cache.values()) n += byAccept.size;
    return n;
  }

  clearCache(): void {
    this.cache.clear();
  }

  /** Which status an empty `filter` result means: 415 when no target consumes the body, else 406. */
  rejectionStatus(contentType: string | undefined, hasBody: boolean): 406 | 415 {
    const ctKey = !this.checksConsumes || !hasBody ? NO_BODY : (contentType ?? '');
    return this.byContentType(ctKey).length === 0 ? 415 : 406;
  }

  private compute(ctKey: string, acceptKey: string): readonly RouteTarget[] {
    const consuming = this.byContentType(ctKey);
    if (acceptKey === ANY || consuming.length === 0) return consuming;
    return consuming.filter((t) => t.produces.length === 0 || acceptedMediaTypes(acceptKey, t.produces).length > 0);
  }

  private byContentType(ctKey: string): readonly RouteTarget[] {
    if (ctKey === NO_BODY) return this.targets;
    // A body without a Content-Type is application/octet-stream (RFC 9110, 8.3).
    const type = ctKey === '' ? 'application/octet-stream' : ctKey;
    return this.targets.filter((t) => t.consumes.length === 0 || contentTypeMatches(type, t.consumes));
  }
}
