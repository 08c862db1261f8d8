// Test support: a middleware store lookup over plain functions, as the worker builds one over its stores.
import { CACHE_STORE, type CacheStore } from '../../src/cache/store.js';
import { RATE_LIMIT_STORE } from '../../src/middleware/rate-limit.js';
import type { StoreKind, StoreLookup } from '../../src/stores/lookup.js';
import type { RateLimitStore } from '../../src/stores/types.js';

export function storeLookup(parts: { cache?: (name: string, owner: string) => CacheStore | undefined; rateLimit?: (name: string) => RateLimitStore | undefined }): StoreLookup {
  return {
    find<T>(kind: StoreKind<T>, name: string, owner: string): T | undefined {
      if (kind === CACHE_STORE) return parts.cache?.(name, owner) as T | undefined;
      if (kind === RATE_LIMIT_STORE) return parts.rateLimit?.(name) as T | undefined;
      return undefined;
    },
    settled: () => Promise.resolve(),
  };
}
