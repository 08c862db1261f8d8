import Negotiator from 'negotiator';
import typeis from 'type-is';
import type { RouteTarget } from './table.js';

/**
 * Content negotiation among equivalent endpoints (contract section 3): keep the targets that consume
 * the request's Content-Type, then those that produce something Accept allows (q-values honoured).
 * The media-type rules come from type-is and negotiator; results are cached per route by header
 * value, so a steady stream of identical headers costs two Map lookups and no allocation.
 */
const CACHE_LIMIT = 256;
const NO_BODY = '\u0000no-body';
const ANY = '\u0000any';

export class TargetNegotiation {
  private readonly cache = new Map<string, Map<string, readonly RouteTarget[]>>();
  private readonly checksConsumes: boolean;
  private readonly checksProduces: boolean;

  constructor(private readonly targets: readonly RouteTarget[]) {
    this.checksConsumes = targets.some((t) => t.consumes.length > 0);
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
    let byAccept = this.cache.get(ctKey);
    if (byAccept === undefined) {
      if (this.cache.size >= CACHE_LIMIT) this.cache.clear();
      byAccept = new Map();
      this.cache.set(ctKey, byAccept);
    }
    let result = byAccept.get(acceptKey);
    if (result === undefined) {
      if (byAccept.size >= CACHE_LIMIT) byAccept.clear();
      result = this.compute(ctKey, acceptKey);
      byAccept.set(acceptKey, result);
    }
    return result;
  }

  /** Which status an empty `filter` result means: 415 when no target consumes the body, else 406. */
  rejectionStatus(contentType: string | undefined, hasBody: boolean): 406 | 415 {
    const ctKey = !this.checksConsumes || !hasBody ? NO_BODY : (contentType ?? '');
    return this.byContentType(ctKey).length === 0 ? 415 : 406;
  }

  private compute(ctKey: string, acceptKey: string): readonly RouteTarget[] {
    const consuming = this.byContentType(ctKey);
    if (acceptKey === ANY || consuming.length === 0) return consuming;
    const negotiator = new Negotiator({ headers: { accept: acceptKey } });
    return consuming.filter((t) => t.produces.length === 0 || negotiator.mediaTypes([...t.produces]).length > 0);
  }

  private byContentType(ctKey: string): readonly RouteTarget[] {
    if (ctKey === NO_BODY) return this.targets;
    // A body without a Content-Type is application/octet-stream (RFC 9110, 8.3).
    const type = ctKey === '' ? 'application/octet-stream' : ctKey;
    return this.targets.filter((t) => t.consumes.length === 0 || typeis.is(type, [...t.consumes]) !== false);
  }
}
