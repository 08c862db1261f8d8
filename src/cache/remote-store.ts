/**
 * A responseCache store on a shared key-value store (a Redis store from kvStores), so instances serve
 * each other's entries. Records travel as one Buffer (codec.ts); each cache keeps its own keys under
 * its middleware id. Entries expire in the store too (the TTL the cache gives). Bytes that do not
 * decode (another version's format, a corrupted value) count as absent.
 */
import type { KeyValueStore } from '../stores/types.js';
import { CacheRecordError, decodeRecord, encodeRecord } from './codec.js';
import type { CacheRecord } from './record.js';
import type { CacheStore } from './store.js';

export class RemoteCacheStore implements CacheStore {
  private readonly prefix: string;

  constructor(
    private readonly store: KeyValueStore,
    owner: string,
    private readonly settled: () => Promise<void>,
    /** Longest one store call may take; default: the store's own command timeout. */
    private readonly maxWaitMs?: number,
  ) {
    this.prefix = `cache:${owner}:`;
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
    return this.store.set(this.prefix + key, encodeRecord(record), Math.max(1, Math.ceil(ttlMs)), this.maxWaitMs);
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
