/**
 * A kind of store a middleware may name, as a typed key: the module that defines the store contract
 * exports its kind (RATE_LIMIT_STORE, CACHE_STORE), so this module names no store type.
 */
export interface StoreKind<T> {
  readonly kind: string;
  /** Never set: carries the store type for find(). */
  readonly __store?: T;
}

/** How middleware reach the stores they name in their config. */
export interface StoreLookup {
  /** The store of `kind` named `name` (`local` or a kvStores name) for middleware `owner`; undefined when there is none. */
  find<T>(kind: StoreKind<T>, name: string, owner: string): T | undefined;
  /** Resolves once the named store answered once or gave up connecting (middleware readiness). */
  settled(name: string): Promise<void>;
}
