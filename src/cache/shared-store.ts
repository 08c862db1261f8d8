/**
 * The `local` store: one cache per instance, shared by every worker through LMDB (the `lmdb` package:
 * a memory-mapped B-tree file with one writer at a time and lock-free readers, safe across processes).
 * A write is a transaction: a worker killed in the middle of one leaves the last committed state.
 * Environments (one per directory, and the instance's directory moving) are lmdb-env.ts's.
 *
 * Per cache (its middleware id) five named databases in the instance's environment:
 *   <id>:e  key -> [expiresAt f64][seq f64][size f64][keyBytes f64][key][record bytes (codec.ts)]
 *   <id>:o  seq -> [key, size, expiresAt]   insertion order, oldest first: what eviction takes
 *   <id>:s  "seq" (last sequence number given), "bytes" (sizes held)
 *   <id>:l  key -> { o: owner token, x: expiry }   coalescing locks (see response-cache.ts)
 *   <id>:g  slot -> generation   invalidations, counted per URL slot (see generation())
 *   <id>:v  0 -> [version f64]   counts the transactions that changed entries (see get())
 * Keys are LMDB keys (lmdb-keys.ts): the cache key, or for one too long for LMDB its head and digest;
 * then the record carries the whole key (keyBytes > 0), compared on read.
 * A set adds its size to "bytes" and, in the same transaction, removes the oldest entries (expired
 * ones first among the few it looks at) until the sum is back under maxBytes: the bound holds for
 * the instance, eviction is deterministic (insertion order: a re-stored key goes to the back) and
 * each set does a bounded amount of work beyond the entries it evicts. Order by insertion and not by
 * access: recording every hit would make each hit a write transaction for the whole instance.
 *
 * Reads take no lock. A record is decoded once per worker and kept (memo, bounded in bytes) with the
 * sequence number it was stored with and the version (<id>:v) it was last checked at. Every write
 * transaction that stores, replaces, evicts or deletes an entry counts one more version, in that
 * transaction: while the version read now is the memo's, no entry changed since, and a hit is the
 * lookup of that one small value, not of its entry (whose long key lmdb encodes in JavaScript). When
 * it moved, the entry is read and its sequence number compared, as a miss of the memo would be. An
 * entry another worker replaced or deleted is seen at the next read either way.
 */
import type { Database } from 'lmdb';
import { LRUCache } from 'lru-cache';
import { CacheRecordError, decodeRecord, encodeRecord } from './codec.js';
import { acquireEnv, releaseEnv, type CacheEnv, type EnvUser, type OwnerStore } from './lmdb-env.js';
import { lmdbKey, rangeStart } from './lmdb-keys.js';
import type { CacheRecord } from './record.js';
import type { CacheStore } from './store.js';

export interface SharedStoreEvents {
  /** A record of `bytes` was added (by this worker). */
  added(bytes: number): void;
  /** One of `bytes` left (through this worker): evicted to make room, or replaced, deleted or expired. */
  removed(bytes: number, evicted: boolean): void;
}

const HEADER = 32;
/** Oldest entries a set looks at for expired ones, beyond what the bound makes it evict. */
const SWEEP = 4;
/** Decoded records a worker keeps, at most this share of maxBytes (and never over MEMO_MAX_BYTES). */
const MEMO_SHARE = 0.25;
const MEMO_MAX_BYTES = 32 * 1024 * 1024;
/** URL slots of the invalidation generations: a bounded table, whatever the number of URLs. */
const GENERATION_SLOTS = 65536;

/**
 * A value as a Buffer. lmdb copies a value into its reusable Buffer, except one of 16 MiB or more
 * (SHARED_BUFFER_THRESHOLD in its native code) that does not fit it: that comes as a plain Uint8Array
 * over the memory map itself (no copy), without Buffer's methods. A view, not a copy, either way.
 */
function asBuffer(value: Uint8Array): Buffer {
  return value instanceof Buffer ? value : Buffer.from(value.buffer, value.byteOffset, value.length);
}
/** lmdb's SHARED_BUFFER_THRESHOLD. */
const SHARED_BUFFER_THRESHOLD = 16 * 1024 * 1024;
/** The key of the version in <id>:v (a number: lmdb encodes it without a loop over characters). */
const VERSION_KEY = 0;

/** A record as this worker decoded it, with what get() checks it by. */
interface Memo {
  /** The entry's sequence number. */
  seq: number;
  record: CacheRecord;
  expiresAt: number;
  /** The version at which the entry was last seen to be this one. */
  version: number;
}

/** The slot of a URL (key.ts urlPrefix) among GENERATION_SLOTS (FNV-1a): the same in every worker. */
function urlSlot(url: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < url.length; i++) hash = Math.imul(hash ^ url.charCodeAt(i), 0x01000193);
  return (hash >>> 0) % GENERATION_SLOTS;
}

let tokens = 0;

/** A coalescing lock as tryLock took it: the key and the owner's token. */
export interface HeldLock {
  key: string;
  token: string;
}

/** An answer fetched after generation() of its URL said `generation`: stored only if no invalidation came since. */
export interface Unchanged {
  url: string;
  generation: number;
}

export class SharedCacheStore implements CacheStore, EnvUser, OwnerStore {
  private readonly env: CacheEnv;
  private entries!: Database<Buffer, string>;
  private order!: Database<[string, number, number], number>;
  private state!: Database<number, string>;
  private locks!: Database<{ o: string; x: number }, string>;
  private generations!: Database<number, number>;
  private versions!: Database<Buffer, number>;
  private readonly memo: LRUCache<string, Memo>;
  /** bytesStored as this worker counted it (added less removed): what leaves when the environment is reopened. */
  private counted = 0;
  closed = false;
  /** This store's database handles are closed (see close()): every call answers as an empty cache. */
  private isShut = false;

  /** `dir`: the instance's directory (instance-dir.ts); undefined: a directory of this store's own. */
  constructor(
    dir: string | undefined,
    private readonly owner: string,
    private readonly maxBytes: number,
    private readonly events: SharedStoreEvents,
  ) {
    this.env = acquireEnv(dir, this);
    let group = this.env.owners.get(owner);
    if (group === undefined) this.env.owners.set(owner, (group = new Set()));
    group.add(this);
    this.openDatabases();
    this.memo = new LRUCache({
      maxSize: Math.max(1, Math.min(MEMO_MAX_BYTES, Math.floor(maxBytes * MEMO_SHARE))),
      sizeCalculation: (item) => Math.max(1, item.record.size),
    });
  }

  private openDatabases(): void {
    const { root } = this.env;
    const owner = this.owner;
    // DATABASES_PER_CACHE (lmdb-env.ts) counts these: the config check's limit on caches follows from it.
    this.entries = root.openDB<Buffer, string>(`${owner}:e`, { encoding: 'binary' });
    this.order = root.openDB<[string, number, number], number>(`${owner}:o`, { encoding: 'json' });
    this.state = root.openDB<number, string>(`${owner}:s`, { encoding: 'json' });
    this.locks = root.openDB<{ o: string; x: number }, string>(`${owner}:l`, { encoding: 'json' });
    this.generations = root.openDB<number, number>(`${owner}:g`, { encoding: 'json' });
    this.versions = root.openDB<Buffer, number>(`${owner}:v`, { encoding: 'binary' });
  }

  /** The environment was reopened in another directory (lmdb-env.ts): empty, and nothing decoded before holds. */
  reopened(): void {
    this.openDatabases();
    this.memo.clear();
    if (this.counted !== 0) this.events.removed(this.counted, false);
    this.counted = 0;
  }

  get(key: string): CacheRecord | undefined {
    if (this.isShut) return undefined;
    // Read first: the entry read below (if any) is of the same snapshot.
    const version = this.version();
    const memo = this.memo.get(key);
    // No entry changed since the memo was checked: it is the entry (callgrind: about 9,000 fewer
    // instructions a hit than the entry's lookup).
    if (memo !== undefined && memo.version === version) return Date.now() < memo.expiresAt ? memo.record : undefined;
    const stored = lmdbKey(key);
    const value = this.entries.getBinaryFast(stored);
    if (value === undefined) return undefined;
    // Below lmdb's threshold a value is always its Buffer, and a length compare costs nothing where
    // asBuffer's instanceof on that buffer costs about 50 ns (bench/cache-hit.ts's decision alone, 2026-11-27).
    const raw = value.length < SHARED_BUFFER_THRESHOLD ? value : asBuffer(value);
    if (raw.length < HEADER) return undefined;
    const expiresAt = raw.readDoubleLE(0);
    if (Date.now() >= expiresAt) return undefined;
    const seq = raw.readDoubleLE(8);
    // Sequence numbers are never given twice: a memo of `key` with this one is this entry.
    if (memo !== undefined && memo.seq === seq) {
      memo.version = version;
      return memo.record;
    }
    const keyBytes = raw.readDoubleLE(24);
    if (keyBytes > 0 && raw.toString('utf8', HEADER, HEADER + keyBytes) !== key) return undefined;
    let record: CacheRecord;
    try {
      // A copy: the value is lmdb's reused buffer, or the memory map.
      record = decodeRecord(Buffer.from(raw.subarray(HEADER + keyBytes)));
    } catch (err) {
      if (err instanceof CacheRecordError) return undefined;
      throw err;
    }
    this.memo.set(key, { seq, record, expiresAt, version });
    return record;
  }

  /** The version of this cache's entries in the current read snapshot (0: nothing was ever written). */
  private version(): number {
    const value = this.versions.getBinaryFast(VERSION_KEY);
    return value === undefined || value.length < 8 ? 0 : value.readDoubleLE(0);
  }

  /** Inside a write transaction that changes entries: counts it (get()); the new version. */
  private nextVersion(): number {
    const version = this.version() + 1;
    const bytes = Buffer.allocUnsafe(8);
    bytes.writeDoubleLE(version, 0);
    this.versions.put(VERSION_KEY, bytes);
    return version;
  }

  set(key: string, record: CacheRecord, ttlMs: number): void {
    this.setAndUnlock(key, record, ttlMs, null);
  }

  /**
   * set(), and in the same write transaction unlock(lock.key, lock.token): a miss that leads stores its
   * answer and lets its followers go in one commit instead of two. A write transaction is the whole
   * cost of a cacheable miss's store work: 17-25 µs of CPU alone, about twice that with the other worker
   * writing too (a node loop of 20,000 lock, store and unlock sequences on one environment).
   *
   * With `unchanged`, nothing is stored if the URL was invalidated since its generation was read (the
   * lock still goes): false then.
   */
  setAndUnlock(key: string, record: CacheRecord, ttlMs: number, lock: HeldLock | null, unchanged: Unchanged | null = null): boolean {
    if (this.isShut) return false;
    const bytes = encodeRecord(record);
    const expiresAt = Date.now() + Math.max(1, Math.ceil(ttlMs));
    const stored = lmdbKey(key);
    const keyBytes = stored === key ? 0 : Buffer.byteLength(key, 'utf8');
    // A kept key counts toward maxBytes too: a Vary'd header value can make it kilobytes long.
    const size = record.size + keyBytes;
    const value = Buffer.allocUnsafe(HEADER + keyBytes + bytes.length);
    value.writeDoubleLE(expiresAt, 0);
    value.writeDoubleLE(size, 16);
    value.writeDoubleLE(keyBytes, 24);
    if (keyBytes > 0) value.write(key, HEADER, 'utf8');
    bytes.copy(value, HEADER + keyBytes);
    const lockKey = lock === null ? null : lmdbKey(lock.key);
    const removed: Array<[number, boolean]> = [];
    let version = 0;
    const seq = this.env.root.transactionSync(() => {
      if (lock !== null && this.locks.get(lockKey!)?.o === lock.token) this.locks.remove(lockKey!);
      if (unchanged !== null && (this.generations.get(urlSlot(unchanged.url)) ?? 0) !== unchanged.generation) return 0;
      const seq = (this.state.get('seq') ?? 0) + 1;
      let total = this.state.get('bytes') ?? 0;
      total -= this.removeEntry(stored, removed, false);
      value.writeDoubleLE(seq, 8);
      this.entries.put(stored, value);
      this.order.put(seq, [stored, size, expiresAt]);
      total += size;
      total = this.makeRoom(total, seq, removed);
      this.state.put('seq', seq);
      this.state.put('bytes', total);
      version = this.nextVersion();
      return seq;
    });
    if (seq === 0) return false;
    this.memo.set(key, { seq, record, expiresAt, version });
    this.report(removed);
    this.counted += size;
    this.events.added(size);
    return true;
  }

  delete(key: string): void {
    if (this.isShut) return;
    const removed: Array<[number, boolean]> = [];
    this.env.root.transactionSync(() => {
      const size = this.removeEntry(lmdbKey(key), removed, false);
      if (size === 0) return;
      this.state.put('bytes', (this.state.get('bytes') ?? 0) - size);
      this.nextVersion();
    });
    this.memo.delete(key);
    this.report(removed);
  }

  /**
   * Every entry whose key starts with `prefix` (a URL, key.ts urlPrefix), in one transaction: keys are
   * ordered, so that is one range (from the prefix, or its head when LMDB keeps longer keys by digest,
   * up to the same with its last character's successor). It also counts an invalidation of the URL
   * (generation()), so that an answer fetched before it is not stored after it.
   */
  deletePrefix(prefix: string): number {
    if (prefix === '' || this.isShut) return 0;
    const start = rangeStart(prefix);
    const end = start.slice(0, -1) + String.fromCharCode(start.charCodeAt(start.length - 1) + 1);
    const removed: Array<[number, boolean]> = [];
    const keys: string[] = [];
    this.env.root.transactionSync(() => {
      const slot = urlSlot(prefix);
      this.generations.put(slot, (this.generations.get(slot) ?? 0) + 1);
      for (const stored of Array.from(this.entries.getKeys({ start, end }))) {
        const key = this.fullKey(stored);
        if (key === undefined || !key.startsWith(prefix)) continue;
        keys.push(key);
        const size = this.removeEntry(stored, removed, false);
        if (size > 0) this.state.put('bytes', (this.state.get('bytes') ?? 0) - size);
      }
      if (keys.length > 0) this.nextVersion();
    });
    for (const key of keys) this.memo.delete(key);
    this.report(removed);
    return keys.length;
  }

  /**
   * How many times `url` (key.ts urlPrefix), or a URL sharing its slot, was invalidated: read before
   * an answer is fetched, and given to setAndUnlock with it (RFC 9111 4.4: an answer fetched before a
   * PUT succeeded must not be stored after it). A shared slot costs at worst one answer not stored.
   */
  generation(url: string): number {
    if (this.isShut) return 0;
    return this.generations.get(urlSlot(url)) ?? 0;
  }

  private report(removed: Array<[number, boolean]>): void {
    for (const [n, evicted] of removed) {
      this.counted -= n;
      this.events.removed(n, evicted);
    }
  }

  /** The whole key of the entry under LMDB key `stored` (a digest key's record carries it). */
  private fullKey(stored: string): string | undefined {
    const value = this.entries.getBinaryFast(stored);
    if (value === undefined) return undefined;
    const raw = asBuffer(value);
    if (raw.length < HEADER) return undefined;
    const keyBytes = raw.readDoubleLE(24);
    return keyBytes > 0 ? raw.toString('utf8', HEADER, HEADER + keyBytes) : stored;
  }

  /** Inside a write transaction: removes LMDB key `stored` and its order entry; the bytes it held (0: absent). */
  private removeEntry(stored: string, removed: Array<[number, boolean]>, evicted: boolean): number {
    const value = this.entries.getBinaryFast(stored);
    if (value === undefined) return 0;
    const raw = asBuffer(value);
    if (raw.length < HEADER) return 0;
    const seq = raw.readDoubleLE(8);
    const size = raw.readDoubleLE(16);
    this.entries.remove(stored);
    this.order.remove(seq);
    removed.push([size, evicted]);
    return size;
  }

  /**
   * Inside a write transaction: drops the expired ones among the SWEEP oldest entries, then evicts
   * the oldest (never `keep`, the one just stored) while the sum is over the bound.
   */
  private makeRoom(total: number, keep: number, removed: Array<[number, boolean]>): number {
    const now = Date.now();
    for (const { key: seq, value } of Array.from(this.order.getRange({ limit: SWEEP }))) {
      if (seq !== keep && now >= value[2]) total -= this.evict(seq, value, removed, false);
    }
    while (total > this.maxBytes) {
      const oldest = Array.from(this.order.getRange({ limit: 2 })).find((item) => item.key !== keep);
      if (oldest === undefined) break;
      total -= this.evict(oldest.key, oldest.value, removed, true);
    }
    return total;
  }

  private evict(seq: number, [stored, size]: [string, number, number], removed: Array<[number, boolean]>, evicted: boolean): number {
    this.order.remove(seq);
    const value = this.entries.getBinaryFast(stored);
    if (value !== undefined) {
      const raw = asBuffer(value);
      if (raw.length >= HEADER && raw.readDoubleLE(8) === seq) {
        const keyBytes = raw.readDoubleLE(24);
        this.memo.delete(keyBytes > 0 ? raw.toString('utf8', HEADER, HEADER + keyBytes) : stored);
        this.entries.remove(stored);
      }
    }
    removed.push([size, evicted]);
    return size;
  }

  /** Bytes the instance holds for this cache. */
  get bytes(): number {
    if (this.isShut) return 0;
    return this.state.get('bytes') ?? 0;
  }

  get count(): number {
    if (this.isShut) return 0;
    return this.entries.getCount();
  }

  /** A token that names this process's claim on a lock. */
  static newToken(): string {
    return `${process.pid}:${++tokens}`;
  }

  /** Takes the lock on `key` for `ttlMs` unless someone else holds it unexpired. */
  tryLock(key: string, token: string, ttlMs: number): boolean {
    // A retired cache's miss goes upstream as a lead would; what it stores goes nowhere.
    if (this.isShut) return true;
    const now = Date.now();
    const stored = lmdbKey(key);
    return this.env.root.transactionSync(() => {
      const held = this.locks.get(stored);
      if (held !== undefined && held.x > now && held.o !== token) return false;
      this.locks.put(stored, { o: token, x: now + ttlMs });
      return true;
    });
  }

  /** Gives up the lock on `key` if `token` holds it. */
  unlock(key: string, token: string): void {
    if (this.isShut) return;
    const stored = lmdbKey(key);
    this.env.root.transactionSync(() => {
      if (this.locks.get(stored)?.o === token) this.locks.remove(stored);
    });
  }

  /** Someone holds an unexpired lock on `key`. */
  locked(key: string): boolean {
    if (this.isShut) return false;
    const held = this.locks.get(lmdbKey(key));
    return held !== undefined && held.x > Date.now();
  }

  ready(): Promise<void> {
    return Promise.resolve();
  }

  /** The instance's entries stay for its other workers (and for this cache's successor after a reload). */
  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    this.closed = true;
    this.memo.clear();
    // A directory of its own goes with its last user, and the bytes it held with it.
    if (this.env.removeDir !== null && this.env.users.size === 1) {
      const held = this.bytes;
      if (held > 0) this.events.removed(held, false);
    }
    const group = this.env.owners.get(this.owner);
    if (group !== undefined && [...group].every((store) => store.closed)) {
      this.env.owners.delete(this.owner);
      // The environment stays open for this worker's other caches: this owner's databases are closed,
      // or every reload that renames a cache would keep six more open until LMDB's maxDbs is full and
      // no reload applies (MDB_DBS_FULL). A handle closes for every store of that name in the process,
      // and its slot goes to the next database opened: so only once all of them are closed, and each
      // then answers as an empty cache (a retired cache may still be finishing a request) instead of
      // touching a slot that may be another cache's.
      if (this.env.users.size > 1) {
        for (const store of group) store.shut();
        for (const db of [this.entries, this.order, this.state, this.locks, this.generations, this.versions]) {
          try {
            void db.close().catch(() => undefined);
          } catch {
            // Already closed: nothing is held.
          }
        }
      }
    }
    releaseEnv(this.env, this);
    return Promise.resolve();
  }

  shut(): void {
    this.isShut = true;
  }
}
