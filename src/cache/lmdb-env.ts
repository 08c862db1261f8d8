/**
 * The LMDB environments of a worker's shared cache stores (shared-store.ts): one per directory, opened
 * by its first store and closed with its last. The instance's directory (instance-dir.ts) is shared
 * with the other workers; without one each store has a private directory, removed with it.
 *
 * The instance's directory can be removed under a running gateway (a tmp cleaner). The workers that
 * have the environment open keep using its unlinked files, and a worker that opened the path anew
 * would get an empty environment of its own: two stores, where a PUT on one worker no longer drops
 * another worker's entries (and, were only LMDB's lock file removed, two writers at once). So a worker
 * that finds the directory or a file of it gone when it opens it says so (missingDirHandler: the worker
 * tells the primary), and the primary, which checks the directory too, creates another and has every
 * worker move there together (moveInstanceEnv).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import type { RootDatabase } from 'lmdb';
import { instanceCacheDir, instanceDirIntact, setInstanceCacheDir } from './instance-dir.js';

/**
 * lmdb (a native addon and its helpers, about 0.1-0.2 s of CPU) is loaded when a worker opens a shared
 * store, not by every worker that merely could: most configs have no responseCache.
 */
let lmdbModule: typeof import('lmdb') | null = null;
function lmdb(): typeof import('lmdb') {
  return (lmdbModule ??= createRequire(import.meta.url)('lmdb') as typeof import('lmdb'));
}

/** Named databases a worker's environment can have open (LMDB's maxDbs: each slot costs every write transaction a little). */
export const MAX_DATABASES = 256;
/** The named databases a shared store opens (shared-store.ts: entries, order, state, locks, generations, versions). */
export const DATABASES_PER_CACHE = 6;
/**
 * How many responseCache entries on the local store one config may have: each opens its databases in
 * the same environment, and one past the limit failed in every worker at start (MDB_DBS_FULL, the
 * workers respawned for ever). The config check refuses more (src/config/semantic-checks.ts).
 */
export const MAX_LOCAL_CACHES = Math.floor(MAX_DATABASES / DATABASES_PER_CACHE);

function openRoot(path: string): RootDatabase {
  return lmdb().open({ path, noSync: true, noMetaSync: true, maxDbs: MAX_DATABASES, mapSize: 1024 * 1024 * 1024, cache: false });
}

/** A store as its owner's group on an environment sees it. */
export interface OwnerStore {
  readonly closed: boolean;
  /** Its database handles are closed, or about to be: it must not touch them again. */
  shut(): void;
}

/** A store on an environment: told when the environment was reopened elsewhere (its databases are new, empty). */
export interface EnvUser {
  reopened(): void;
}

export class CacheEnv {
  readonly users = new Set<EnvUser>();
  /**
   * The stores of each owner (cache id) on it, open or retired, until the last of them closes: then
   * the owner's databases are closed and every one of its stores shut (see shared-store.ts close()).
   */
  readonly owners = new Map<string, Set<OwnerStore>>();

  constructor(
    /** Its directory, or `private:<n>`. */
    public key: string,
    public root: RootDatabase,
    /** A directory of its own (no instance directory): removed with the last user. */
    readonly removeDir: string | null,
  ) {}
}

const envs = new Map<string, CacheEnv>();
let privateDirs = 0;
let missingDirHandler: ((dir: string) => void) | null = null;

/** Called when a worker is about to open the instance's directory and finds it gone (worker.ts tells the primary). */
export function onMissingInstanceDir(handler: ((dir: string) => void) | null): void {
  missingDirHandler = handler;
}

/** The environment of `dir` (undefined: a private one), with `user` counted among its users. */
export function acquireEnv(dir: string | undefined, user: EnvUser): CacheEnv {
  // Without an instance directory each store has one of its own (nothing to share it with).
  const key = dir ?? `private:${++privateDirs}`;
  let env = envs.get(key);
  if (env === undefined) {
    // LMDB creates what is missing: said, so that the primary moves every worker to a new directory.
    if (dir !== undefined && !instanceDirIntact(dir)) missingDirHandler?.(dir);
    const path = dir ?? mkdtempSync(join(tmpdir(), `specgate-cache-${process.pid}-`));
    env = new CacheEnv(key, openRoot(path), dir === undefined ? path : null);
    envs.set(key, env);
  }
  env.users.add(user);
  return env;
}

export function releaseEnv(env: CacheEnv, user: EnvUser): void {
  env.users.delete(user);
  if (env.users.size > 0) return;
  if (envs.get(env.key) === env) envs.delete(env.key);
  const dir = env.removeDir;
  void env.root.close().then(() => {
    if (dir !== null) rmSync(dir, { recursive: true, force: true });
  });
}

/**
 * The primary moved the instance's cache to `dir`: stores opened from now on open it there, and the
 * environment open on the old directory is reopened there, its stores told (they start empty), and
 * the old directory removed. False when `dir` is already the instance's directory.
 */
export function moveInstanceEnv(dir: string): boolean {
  const from = instanceCacheDir();
  if (from === dir) return false;
  setInstanceCacheDir(dir);
  const env = from === undefined ? undefined : envs.get(from);
  if (env === undefined) return true;
  const old = env.root;
  env.root = openRoot(dir);
  envs.delete(env.key);
  env.key = dir;
  envs.set(dir, env);
  for (const user of env.users) user.reopened();
  // The old directory is no one's any more; this worker may have made it again (LMDB creates a missing one).
  void old
    .close()
    .catch(() => undefined)
    .then(() => rmSync(from!, { recursive: true, force: true }));
  return true;
}
