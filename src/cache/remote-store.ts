/**
 * A responseCache store on a shared key-value store (a Redis store from kvStores), so instances serve
 * each other's entries. Records travel as one Buffer (codec.ts); each cache keeps its own keys under
 * its middleware id. Entries expire in the store too (the TTL the cache gives). Bytes that do not
 * decode (another version's format, a corrupted value) count as absent. On a store that files keys in
 * groups (setInGroup/deleteGroup), every entry is filed under its URL (key.ts urlOfKey), so that an
 * invalidation drops the URL's every variant (deletePrefix) as the local store does, and moves the
 * URL's generation on: a lookup reads the URL's generation with the entry, and an answer fetched after
 * it is stored only if no invalidation came since (setIfUnchanged), as with the local store.
 */
import type { KeyValueStore } from '../stores/types.js';
import { CacheRecordError, decodeRecord, encodeRecord } from './codec.js';
import { urlOfKey } from './key.js';
import type { CacheRecord } from './record.js';
import type { CacheStore } from './store.js';

/** URLs whose generation a store remembers; a lookup and its forward are microseconds apart. */
const REMEMBERED_URLS = 4096;

export class RemoteCacheStore implements CacheStore {
  private readonly prefix: string;
  /** Every entry of one URL (key.ts urlPrefix): present when the store files keys in groups. */
  readonly deletePrefix?: (prefix: string) => Promise<number>;
  /** The generation each URL's last lookup read (bounded: a URL not found here is stored unchecked). */
  private readonly generations = new Map<string, number>();

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
    let bytes: Buffer | null;
    if (this.deletePrefix !== undefined && this.store.getInGroup !== undefined) {
      const url = urlOfKey(key);
      const read = await this.store.getInGroup(this.prefix + key, this.prefix + url, this.maxWaitMs);
      this.remember(url, read.generation);
      bytes = read.value;
    } else bytes = await this.store.get(this.prefix + key, this.maxWaitMs);
    if (bytes === null) return undefined;
    try {
      return decodeRecord(bytes);
    } catch (err) {
      if (err instanceof CacheRecordError) return undefined;
      throw err;
    }
  }

  set(key: string, record: CacheRecord, ttlMs: number): Promise<void> {
    return this.write(key, record, ttlMs, urlOfKey(key)).then(() => undefined);
  }

  /**
   * The generation of `url` its last lookup read: a number every invalidation of it, on any instance,
   * moves on. Undefined when this store keeps none (no groups) or forgot it.
   */
  generation(url: string): number | undefined {
    return this.generations.get(url);
  }

  /** set(), unless `url` was invalidated since generation() said `generation`: false then, nothing stored. */
  setIfUnchanged(key: string, record: CacheRecord, ttlMs: number, url: string, generation: number): Promise<boolean> {
    return this.write(key, record, ttlMs, url, generation);
  }

  /** Stores `record`, filed under `url` on a store with groups (only if its generation is `generation`, when given); false when it was not. */
  private write(key: string, record: CacheRecord, ttlMs: number, url: string, generation?: number): Promise<boolean> {
    const ttl = Math.max(1, Math.ceil(ttlMs));
    if (this.deletePrefix === undefined) return this.store.set(this.prefix + key, encodeRecord(record), ttl, this.maxWaitMs).then(() => true);
    return this.store.setInGroup!(this.prefix + key, this.prefix + url, encodeRecord(record), ttl, this.maxWaitMs, generation);
  }

  private remember(url: string, generation: number): void {
    const generations = this.generations;
    // Re-inserted, so the oldest read is the first to go.
    generations.delete(url);
    if (generations.size >= REMEMBERED_URLS) generations.delete(generations.keys().next().value!);
    generations.set(url, generation);
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
