import type { GcraPolicy, RateDecision } from './gcra.js';

/**
 * What the rateLimit middleware needs of a store. `take` answers with the decision itself when it can
 * without waiting (the local store, from a lease) or with a Promise of it; tell them apart with
 * `instanceof Promise`. A Promise rejects only with a StoreError, which the caller maps to
 * `onStoreError`.
 */
export interface RateLimitStore {
  /** `local`, or the store's key in `kvStores`. */
  readonly name: string;
  /**
   * take() settles within its `maxWaitMs` by itself (a StoreError `timeout` past it); absent or false:
   * the caller bounds the wait itself (the local store, whose lease requests wait on the primary).
   */
  readonly boundsWait?: boolean;
  /** One token of `key`'s bucket. `maxWaitMs`: the caller's budget (the redis store honours it; see README for local). */
  take(key: string, policy: GcraPolicy, maxWaitMs?: number): RateDecision | Promise<RateDecision>;
}

/** A value read with its group's generation (KeyValueStore.getInGroup). */
export interface GroupRead {
  value: Buffer | null;
  generation: number;
}

/** Buffer values with a TTL, for the response cache (the caller bounds value sizes). */
export interface KeyValueStore {
  readonly name: string;
  get(key: string, maxWaitMs?: number): Promise<Buffer | null>;
  set(key: string, value: Buffer, ttlMs: number, maxWaitMs?: number): Promise<void>;
  delete(key: string, maxWaitMs?: number): Promise<boolean>;
  /**
   * Optional: set() that also files `key` under `group`, so that deleteGroup() removes it with the
   * group's other keys (the response cache files every entry of a URL under the URL). With
   * `generation` (what getInGroup() said), nothing is written if deleteGroup() ran on the group since:
   * false then.
   */
  setInGroup?(key: string, group: string, value: Buffer, ttlMs: number, maxWaitMs?: number, generation?: number): Promise<boolean>;
  /** Optional, with setInGroup: removes every key filed under `group`; how many were filed. */
  deleteGroup?(group: string, maxWaitMs?: number): Promise<number>;
  /**
   * Optional, with setInGroup: get() of `key` while it is filed under `group` (null once the group is
   * gone, deleted or evicted), and the group's generation (a number that every deleteGroup() of the
   * group moves on), in one read.
   */
  getInGroup?(key: string, group: string, maxWaitMs?: number): Promise<GroupRead>;
}
