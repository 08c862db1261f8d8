/**
 * Where a responseCache keeps its records. `local` (shared-store.ts) is the instance's, shared by its workers; other
 * stores (a Redis one, so instances share entries) come from the `cacheStores` lookup the pipeline's
 * builder is given, and keep records as bytes (codec.ts encodes a record into one Buffer and back).
 *
 * Any method may answer synchronously or with a Promise; the cache takes a synchronous answer at once
 * (a local hit then costs no microtask and no SLA timer in the pipeline). A store that fails rejects
 * (or throws): the cache counts it and goes on as if nothing were stored.
 */
import type { CacheRecord } from './record.js';
import type { StoreKind } from '../stores/lookup.js';

export interface CacheStore {
  /** The record under `key`, or undefined (absent or expired). */
  get(key: string): CacheRecord | undefined | Promise<CacheRecord | undefined>;
  /** Keeps `record` under `key` for `ttlMs` (then it is gone), replacing what was there. */
  set(key: string, record: CacheRecord, ttlMs: number): void | Promise<void>;
  delete(key: string): void | Promise<void>;
  /**
   * Removes every entry whose key starts with `prefix` (key.ts: every entry of one URL); how many.
   * Absent when the store cannot list keys by prefix cheaply: the cache then deletes the keys it knows.
   */
  deletePrefix?(prefix: string): number | Promise<number>;
  /**
   * Optional: how many times `url` was invalidated (deletePrefix of its entries, on any instance), as
   * far as the store knows now; undefined when it cannot say. Read before an answer is fetched, and
   * given back to setIfUnchanged() with it.
   */
  generation?(url: string): number | undefined;
  /** Optional, with generation(): set(), unless `url` was invalidated since it was `generation`: false then, nothing stored. */
  setIfUnchanged?(key: string, record: CacheRecord, ttlMs: number, url: string, generation: number): boolean | Promise<boolean>;
  /** Resolves once the store can answer (or has given up trying to connect). */
  ready(): Promise<void>;
  /** The cache that uses it is closed: free what is held for it. */
  close(): Promise<void>;
}

/**
 * The kind of store a responseCache names (a kvStores name); the lookup's `owner` is the middleware
 * id, for a store that keeps several caches apart by key prefix.
 */
export const CACHE_STORE: StoreKind<CacheStore> = Object.freeze({ kind: 'cache' });
