/**
 * A per-worker store: records kept as objects in the worker's memory (no encoding), least recently
 * used first out once their sizes add up to more than `maxBytes` (lru-cache's maxSize). It was the
 * `local` store before the instance's shared one (shared-store.ts); bench/cache-hit.ts keeps it as
 * the baseline a shared hit is compared with.
 *
 * It answers synchronously. An expired record is dropped when next asked for (or evicted first).
 */
import { LRUCache } from 'lru-cache';
import type { CacheRecord } from './record.js';
import type { CacheStore } from './store.js';

export interface LocalStoreEvents {
  /** A record of `bytes` was added. */
  added(bytes: number): void;
  /** One of `bytes` left: evicted (to make room), or replaced, deleted, expired or cleared. */
  removed(bytes: number, evicted: boolean): void;
}

/** Spares lru-cache an options object per get. */
const GET_OPTIONS = {};

export class LocalCacheStore implements CacheStore {
  private readonly lru: LRUCache<string, CacheRecord>;

  constructor(maxBytes: number, events: LocalStoreEvents) {
    this.lru = new LRUCache<string, CacheRecord>({
      maxSize: maxBytes,
      sizeCalculation: (record) => record.size,
      onInsert: (record) => events.added(record.size),
      dispose: (record, _key, reason) => events.removed(record.size, reason === 'evict'),
    });
  }

  get(key: string): CacheRecord | undefined {
    return this.lru.get(key, GET_OPTIONS);
  }

  set(key: string, record: CacheRecord, ttlMs: number): void {
    this.lru.set(key, record, { ttl: Math.max(1, Math.ceil(ttlMs)) });
  }

  delete(key: string): void {
    this.lru.delete(key);
  }

  /** Bytes held now. */
  get bytes(): number {
    return this.lru.calculatedSize;
  }

  get count(): number {
    return this.lru.size;
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.lru.clear();
    return Promise.resolve();
  }
}
