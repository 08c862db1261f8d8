/**
 * What a cache store holds under a key: a stored response, or, under the key of a URL whose answers
 * vary, the names of the request headers they vary on (the variants have keys of their own, see key.ts).
 *
 * A StoredResponse is built once (when stored, or when a remote store's bytes are decoded) and then
 * only read: its freshness deadline, its Age origin and the flags the lookup needs are computed here
 * from the http-cache-semantics policy, and the answer it is served as is built at most once per
 * second of age, so a hit allocates nothing beyond its key.
 */
import CachePolicy from 'http-cache-semantics';
import type { ContentAnswer } from '../exchange/answer.js';
import { HeadBlock } from '../http/head-block.js';
import { fieldValue } from '../http/header-list.js';

export type CacheStatus = 'HIT' | 'STALE' | 'REVALIDATED' | 'UPDATING';

/** Headers a 304 carries from the entry (RFC 9110 15.4.5), besides Age and X-Cache. */
const NOT_MODIFIED_HEADERS = new Set(['cache-control', 'content-location', 'etag', 'expires', 'vary', 'last-modified']);

/** Per-entry bookkeeping beyond the bytes themselves (policy object, strings, the record). */
const RECORD_OVERHEAD_BYTES = 512;

export class StoredResponse {
  readonly kind = 'response';
  /** Epoch ms until which it is fresh (the policy's lifetime less the age it arrived with). */
  readonly freshUntil: number;
  /** must-revalidate / proxy-revalidate / s-maxage: never served stale, not even when the upstream fails. */
  readonly mustRevalidate: boolean;
  /** stale-while-revalidate (RFC 5861), in ms; 0 when absent. */
  readonly staleWhileRevalidateMs: number;
  /** `public` or `s-maxage`: may answer a request that carries Authorization. */
  readonly sharedWithAuth: boolean;
  /** Bytes it stands for in a store bounded in bytes. */
  readonly size: number;
  /** Epoch ms at which its age was 0 (Age = now - ageOrigin, like the policy's age()). */
  private readonly ageOrigin: number;
  private hit: ContentAnswer | null = null;
  private hitAge = -1;
  private stale: ContentAnswer | null = null;
  private staleAge = -1;

  /**
   * `headers`: the end-to-end headers served with it (flat, lower-case names; no Age, no X-Cache).
   * `policy`: its http-cache-semantics policy (see rules.ts for the view of the headers it was made from).
   * `url`: the key it was stored under for the policy's request matching (the primary key).
   */
  constructor(
    readonly status: number,
    readonly headers: readonly string[],
    readonly body: Buffer,
    readonly policy: CachePolicy,
    readonly url: string,
    readonly storedAt: number,
    /** The Cache-Control this cache obeys when a targeted field (RFC 9213) overrode the header's. */
    readonly targetedCacheControl?: string,
  ) {
    const now = Date.now();
    const age = policy.age();
    this.ageOrigin = now - age * 1000;
    this.freshUntil = now + (policy.maxAge() - age) * 1000;
    const cacheControl = (targetedCacheControl ?? fieldValue(headers, 'cache-control'))?.toLowerCase() ?? '';
    // s-maxage implies proxy-revalidate in a shared cache (RFC 9111 5.2.2.10); no-cache forbids any
    // use without revalidation, so never stale either (RFC 9111 4.2.4).
    this.mustRevalidate =
      hasDirective(cacheControl, 'must-revalidate') ||
      hasDirective(cacheControl, 'proxy-revalidate') ||
      hasDirective(cacheControl, 's-maxage') ||
      hasDirective(cacheControl, 'no-cache');
    // RFC 9111 3.5: what lets a shared cache reuse an answer to a request with Authorization.
    this.sharedWithAuth = hasDirective(cacheControl, 'public') || hasDirective(cacheControl, 's-maxage') || hasDirective(cacheControl, 'must-revalidate');
    const swr = /(?:^|,)\s*stale-while-revalidate\s*=\s*"?(\d+)"?\s*(?:,|$)/.exec(cacheControl);
    this.staleWhileRevalidateMs = swr === null ? 0 : Number(swr[1]) * 1000;
    let size = RECORD_OVERHEAD_BYTES + body.length + url.length;
    for (const text of headers) size += text.length;
    this.size = size;
  }

  /** Age in whole seconds at `now` (rounded, as http-cache-semantics rounds it). */
  ageAt(now: number): number {
    return Math.max(0, Math.round((now - this.ageOrigin) / 1000));
  }

  /** The answer it is served as at `now`: built again only when its Age changed. */
  answer(status: CacheStatus, now: number): ContentAnswer {
    const age = this.ageAt(now);
    if (status === 'REVALIDATED' || status === 'UPDATING') return this.build(age, status, false);
    if (status === 'HIT') {
      if (this.hitAge !== age || this.hit === null) {
        this.hit = this.build(age, status, true);
        this.hitAge = age;
      }
      return this.hit;
    }
    if (this.staleAge !== age || this.stale === null) {
      this.stale = this.build(age, status, true);
      this.staleAge = age;
    }
    return this.stale;
  }

  /** The stored validators (RFC 9110 8.8): ETag, Last-Modified. */
  get etag(): string | undefined {
    return fieldValue(this.headers, 'etag');
  }

  get lastModified(): string | undefined {
    return fieldValue(this.headers, 'last-modified');
  }

  /**
   * A client's conditional GET/HEAD against this entry (RFC 9111 4.3.2, RFC 9110 13.2.2): true when it
   * is answered 304. If-None-Match (weak comparison) decides when present, else If-Modified-Since
   * against Last-Modified (a 200 only).
   */
  notModified(requestHeaders: readonly string[], parseDate: (text: string) => number | null): boolean {
    const noneMatch = fieldValue(requestHeaders, 'if-none-match');
    if (noneMatch !== undefined) {
      const etag = this.etag;
      if (etag === undefined) return false;
      const tag = weak(etag.trim());
      return noneMatch.split(',').some((item) => item.trim() === '*' || weak(item.trim()) === tag);
    }
    const since = fieldValue(requestHeaders, 'if-modified-since');
    if (since === undefined || this.status !== 200) return false;
    const sinceMs = parseDate(since);
    // Without Last-Modified, the origin's Date (else when it arrived) stands for it (RFC 9111 4.3.2).
    const modified = this.lastModified === undefined ? this.policy.date() : parseDate(this.lastModified);
    return sinceMs !== null && modified !== null && modified <= sinceMs;
  }

  /**
   * A single-range request (`Range: bytes=a-b`, `a-`, `-n`) on a stored 200: the 206 with that part
   * (RFC 9110 14.2, 15.3.7). Null for anything else (several ranges, another unit, an If-Range, a
   * range past the end): the whole answer is served instead, as a cache may.
   */
  rangeAnswer(requestHeaders: readonly string[], now: number): ContentAnswer | null {
    const range = fieldValue(requestHeaders, 'range');
    if (range === undefined || this.status !== 200 || fieldValue(requestHeaders, 'if-range') !== undefined) return null;
    const m = /^bytes=(\d*)-(\d*)$/.exec(range.trim());
    if (m === null || (m[1] === '' && m[2] === '')) return null;
    const length = this.body.length;
    let first: number;
    let last: number;
    if (m[1] === '') {
      const suffix = Number(m[2]);
      if (suffix === 0) return null;
      first = Math.max(0, length - suffix);
      last = length - 1;
    } else {
      first = Number(m[1]);
      last = m[2] === '' ? length - 1 : Math.min(Number(m[2]), length - 1);
    }
    if (first >= length || first > last) return null;
    const headers = this.headers.filter((_, i, all) => (i % 2 === 0 ? all[i] !== 'content-range' : all[i - 1] !== 'content-range'));
    headers.push('content-range', `bytes ${first}-${last}/${length}`, 'age', String(this.ageAt(now)), 'x-cache', 'HIT');
    return { kind: 'content', status: 206, headers, body: this.body.subarray(first, last + 1) };
  }

  /** The 304 it answers a matching conditional request with (HIT; REVALIDATED right after a revalidation). */
  notModifiedAnswer(now: number, status: 'HIT' | 'REVALIDATED' = 'HIT'): ContentAnswer {
    const headers: string[] = [];
    for (let i = 0; i < this.headers.length; i += 2) {
      if (NOT_MODIFIED_HEADERS.has(this.headers[i]!)) headers.push(this.headers[i]!, this.headers[i + 1]!);
    }
    headers.push('age', String(this.ageAt(now)), 'x-cache', status);
    return { kind: 'content', status: 304, headers, body: EMPTY };
  }

  /** `reused`: kept and served again (HIT, STALE): its head is kept encoded by the writer (HeadBlock). */
  private build(age: number, status: CacheStatus, reused: boolean): ContentAnswer {
    const headers = this.headers.slice();
    headers.push('age', String(age), 'x-cache', status);
    if (!reused) return { kind: 'content', status: this.status, headers, body: this.body };
    return { kind: 'content', status: this.status, headers, body: this.body, block: new HeadBlock() };
  }
}

const EMPTY = new Uint8Array(0);

function weak(tag: string): string {
  return tag.startsWith('W/') ? tag.slice(2) : tag;
}

/** Under a URL whose answers vary: the request header names (lower-case) that pick a variant. */
export class VaryIndex {
  readonly kind = 'vary';
  readonly size: number;

  constructor(
    readonly names: readonly string[],
    readonly storedAt: number,
  ) {
    this.size = RECORD_OVERHEAD_BYTES / 4 + names.join(',').length;
  }
}

export type CacheRecord = StoredResponse | VaryIndex;


/** A Cache-Control directive (lower-case `list`), with or without a value. */
export function hasDirective(list: string, directive: string): boolean {
  if (list === '') return false;
  for (const part of list.split(',')) {
    const token = part.trim();
    if (token === directive || (token.startsWith(directive) && token.charCodeAt(directive.length) === 0x3d /* = */)) return true;
  }
  return false;
}
