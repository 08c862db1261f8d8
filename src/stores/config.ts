/*
 * `kvStores` (docs/reference/stores.md#redis): the JSON-schema fragment the gateway's config schema plugs in as
 * `properties.kvStores`, its TypeScript type after defaults, the checks a schema cannot say, and the
 * factory that builds a worker's stores.
 */
import type { LeaseClient } from './lease-client.js';
import type { RedisStore, RedisStoreConfig, RedisStoreState, RedisStoreStats } from './redis-store.js';

export type { RedisStoreConfig } from './redis-store.js';
import type { KeyValueStore, RateLimitStore } from './types.js';

/** The always-present store; no `kvStores` entry may take its name. */
export const LOCAL_STORE = 'local';
export const STORE_NAME_PATTERN = '^[A-Za-z0-9_-]{1,64}$';

export const REDIS_STORE_DEFAULTS = {
  keyPrefix: 'gw:',
  connectTimeoutMs: 1000,
  commandTimeoutMs: 50,
  connectAttempts: 3,
  breakerFailures: 5,
  breakerResetMs: 1000,
} as const;

const positiveInteger = (description: string, defaultValue: number, maximum?: number) => ({
  type: 'integer',
  minimum: 1,
  ...(maximum === undefined ? {} : { maximum }),
  default: defaultValue,
  description,
});

export const redisStoreSchema = {
  type: 'object',
  description: 'A Redis store, shared by every gateway instance that names the same Redis (rate limits across instances, response cache).',
  additionalProperties: false,
  required: ['type', 'url'],
  properties: {
    type: { type: 'string', enum: ['redis'], description: 'The only remote store type: "redis".' },
    url: {
      type: 'string',
      pattern: '^rediss?://',
      description:
        'Where Redis listens: "redis://[user:password@]host:port[/db]", or "rediss://..." for TLS (db 0 by default). ' +
        'Credentials in the URL stay out of logs and the health report.',
    },
    keyPrefix: {
      type: 'string',
      maxLength: 64,
      default: REDIS_STORE_DEFAULTS.keyPrefix,
      description:
        'Prepended to every key the gateway writes (rate-limit buckets under "<prefix>rl:", cached values under ' +
        '"<prefix>kv:"). Gateways that must share limits use the same prefix.',
    },
    connectTimeoutMs: positiveInteger('One connection attempt (TCP and TLS), in ms.', REDIS_STORE_DEFAULTS.connectTimeoutMs, 60_000),
    commandTimeoutMs: positiveInteger(
      'One command, from the call to the reply, in ms; a middleware also never waits longer than its slaMs.',
      REDIS_STORE_DEFAULTS.commandTimeoutMs,
      60_000,
    ),
    connectAttempts: positiveInteger(
      'Failed attempts (connection refused or timed out, first command unanswered) after which the store stops ' +
        'holding readiness: its middleware leave "pending" and apply onStoreError until Redis answers. It keeps retrying.',
      REDIS_STORE_DEFAULTS.connectAttempts,
      100,
    ),
    breakerFailures: positiveInteger(
      'Consecutive failed commands (timeouts, lost connection) after which the store fails fast without calling Redis.',
      REDIS_STORE_DEFAULTS.breakerFailures,
      1000,
    ),
    breakerResetMs: positiveInteger(
      'How long the store fails fast before one probe command; a probe that succeeds closes the breaker.',
      REDIS_STORE_DEFAULTS.breakerResetMs,
      3_600_000,
    ),
  },
} as const;

export const kvStoresSchema = {
  type: 'object',
  default: {},
  description:
    'Named stores middleware refer to by `store`. "local" (this instance\'s own, consistent across its workers: memory for rate limits, an LMDB file for a response cache) ' +
    'always exists and cannot be redefined; names are 1-64 letters, digits, "_" or "-".',
  // "local" is refused by kvStoreProblems, with a clearer message than a schema `not` gives.
  propertyNames: { pattern: STORE_NAME_PATTERN },
  additionalProperties: redisStoreSchema,
} as const;


/** `kvStores` after schema validation and defaults. */
export type KvStoresConfig = Record<string, RedisStoreConfig>;

export interface KvStoreProblem {
  /** JSON pointer below the config root. */
  pointer: string;
  reason: string;
}

/**
 * What the schema does not check: the reserved name and the URL's shape. Pointers are absolute
 * (`/kvStores/<name>/url`).
 */
export function kvStoreProblems(kvStores: KvStoresConfig): KvStoreProblem[] {
  const problems: KvStoreProblem[] = [];
  for (const [name, entry] of Object.entries(kvStores)) {
    if (name === LOCAL_STORE) {
      problems.push({ pointer: `/kvStores/${name}`, reason: `the name "${LOCAL_STORE}" is reserved for the instance's own store; choose another` });
      continue;
    }
    const pointer = `/kvStores/${name.replaceAll('~', '~0').replaceAll('/', '~1')}/url`;
    let url: URL;
    try {
      url = new URL(entry.url);
    } catch {
      problems.push({ pointer, reason: 'not a URL; expected "redis://host:port[/db]"' });
      continue;
    }
    if (url.protocol !== 'redis:' && url.protocol !== 'rediss:') problems.push({ pointer, reason: `scheme must be redis: or rediss:, got ${url.protocol}` });
    else if (url.hostname === '') problems.push({ pointer, reason: 'no host' });
    else if (!/^(\/\d{0,5})?$/.test(url.pathname)) problems.push({ pointer, reason: `the path may only be a database number, e.g. "/0"; got "${url.pathname}"` });
    else if (url.search !== '' || url.hash !== '') problems.push({ pointer, reason: 'no query or fragment' });
  }
  return problems;
}

/** The URL without its credentials, for logs and the health report. */
export function redactedUrl(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.username !== '' || url.password !== '') {
      url.username = '';
      url.password = '';
    }
    return url.toString();
  } catch {
    return '(invalid URL)';
  }
}

export interface StoreSnapshot {
  type: 'local' | 'redis';
  /** redis only: the redacted URL. */
  url?: string;
  state: RedisStoreState['state'];
  breaker?: RedisStoreState['breaker'];
  lastError: string | null;
  /** Why it is not ready (null when it is). */
  reason?: string | null;
  stats?: RedisStoreStats;
}

/** A worker's stores: `local` (its LeaseClient) and one RedisStore per `kvStores` entry. */
export interface Stores {
  readonly local: LeaseClient;
  readonly redis: ReadonlyMap<string, RedisStore>;
  /** The store a rateLimit entry names (`local` or a kvStores key), or undefined. */
  rateLimitStore(name: string): RateLimitStore | undefined;
  /** The store a responseCache entry names, when remote; undefined for `local` and unknown names. */
  keyValueStore(name: string): KeyValueStore | undefined;
  /** Resolves when every store has settled (answered once, or spent its connection attempts). */
  settled(name?: string): Promise<void>;
  /** For the health report (`kvStores`) and /metrics, by name. */
  snapshot(): Record<string, StoreSnapshot>;
  close(): Promise<void>;
}

/**
 * Builds the stores of one worker. node-redis is loaded only when a Redis store is configured. The
 * config must have passed the schema (and kvStoreProblems); a name clash with `local` throws.
 */
export async function createStores(kvStores: KvStoresConfig, options: { local: LeaseClient }): Promise<Stores> {
  const redis = new Map<string, RedisStore>();
  const entries = Object.entries(kvStores);
  if (entries.length > 0) {
    const { RedisStore } = await import('./redis-store.js');
    for (const [name, entry] of entries) {
      if (name === LOCAL_STORE) throw new Error(`kvStores: the name "${LOCAL_STORE}" is reserved for the instance's own store`);
      redis.set(name, new RedisStore({ name, ...entry }));
    }
  }
  const local = options.local;
  return {
    local,
    redis,
    rateLimitStore: (name) => (name === LOCAL_STORE ? local : redis.get(name)),
    keyValueStore: (name) => redis.get(name),
    async settled(name) {
      if (name === LOCAL_STORE) return;
      if (name !== undefined) return redis.get(name)?.settled();
      await Promise.all([...redis.values()].map((store) => store.settled()));
    },
    snapshot() {
      const out: Record<string, StoreSnapshot> = { [LOCAL_STORE]: { type: 'local', state: 'ready', lastError: null } };
      for (const [name, store] of redis) {
        const state = store.state();
        out[name] = { type: 'redis', url: redactedUrl(kvStores[name]!.url), ...state, stats: store.stats() };
      }
      return out;
    },
    async close() {
      local.close();
      await Promise.all([...redis.values()].map((store) => store.close()));
    },
  };
}
