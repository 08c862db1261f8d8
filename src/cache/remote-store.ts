/**
 * A responseCache store on a shared key-value store (a Redis store from kvStores), so instances serve
 * each other's entries. Records travel as one Buffer (codec.ts); each cache keeps its own keys under
 * its middleware id. Entries expire in the store too (the TTL the cache gives). Bytes that do not
 * decode (another version's format, a corrupted value) count as absent. On a store that files keys in
 * groups (setInGroup/deleteGroup), every entry is filed under its URL (key.ts urlOfKey), so that an
 * invalidation drops the URL's every variant (deletePrefix) as the local store does.
 */
import type { KeyValueStore } from '../stores/types.js';
import { CacheRecordError, decodeRecord, encodeRecord } from './codec.js';
import { urlOfKey } from './key.js';
import type { CacheRecord } from './record.js';
import type { CacheStore } from './store.js';

export class RemoteCacheStore implements CacheStore {
  private readonly prefix: string;
  /** Every entry of one URL (key.ts urlPrefix): present when the store files keys in groups. */
  readonly deletePrefix?: (prefix: string) => Promise<number>;

  constructor(
    private readonly store: KeyValueStore,
    owner: string,
    private readonly settled: () => Promise<void>,
    /** Longest one store call may take; default: the store's own command timeout. */
    private readonly maxWaitMs?: number,
  ) {
    this.prefix = `cache:${owner}:`;
    if (store.setInGroup !== undefined && store.deleteGroup !== undefined) this.deletePrefix = (prefix) => store.deleteGroup!(this.prefix + prefix, this.maxWaitMs);
  }

  async get(key: string): Promise<CacheRecord | undefined> {
    const bytes = await this.store.get(this.prefix + key, this.maxWaitMs);
    if (bytes === null) return undefined;
    try {
      return decodeRecord(bytes);
    } catch (err) {
      if (err instanceof CacheRecordError) return undefined;
      throw err;
    }
  }

  set(key: string, record: CacheRecord, ttlMs: number): Promise<void> {
    const ttl = Math.max(1, Math.ceil(ttlMs));
    if (this.deletePrefix !== undefined) return this.store.setInGroup!(this.prefix + key, this.prefix + urlOfKey(key), encodeRecord(record), ttl, this.maxWaitMs);
    return this.store.set(this.prefix + key, encodeRecord(record), ttl, this.maxWaitMs);
  }

  async delete(key: string): Promise<void> {
    await this.store.delete(this.prefix + key, this.maxWaitMs);
  }

  ready(): Promise<void> {
    return this.settled();
  }

  /** The store is the worker's, shared with other middleware: nothing to free here. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}
