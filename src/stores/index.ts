/**
 * The stores (docs/reference/stores.md): `local` (leases from the primary's LeaseBank, one limit per
 * instance across its workers) and `redis` (one limit across instances; Buffer values with a TTL).
 * Design, accuracy and bounds: ./README.md.
 */
export { StoreError, type StoreErrorCode } from './store-errors.js';
export { type GcraPolicy, type RateDecision, gcraPolicy } from './gcra.js';
export { LeaseBank, type LeaseBankOptions, type LeaseBankStats } from './lease-bank.js';
export { LeaseClient, type LeaseClientOptions, type LeaseClientStats, type TakeResult } from './lease-client.js';
export {
  type LeaseBankMessage,
  type LeaseWorkerMessage,
  isLeaseBankMessage,
  isLeaseWorkerMessage,
} from './lease-messages.js';
export type { RedisStore, RedisStoreState, RedisStoreStats } from './redis-store.js';
export type { KeyValueStore, RateLimitStore } from './types.js';
export {
  type KvStoresConfig,
  type RedisStoreConfig,
  type StoreSnapshot,
  type Stores,
  LOCAL_STORE,
  createStores,
  kvStoreProblems,
  kvStoresSchema,
  redactedUrl,
} from './config.js';
