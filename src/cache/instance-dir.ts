/**
 * Where the `local` response cache of an instance lives: one directory under the OS temporary
 * directory (`<tmpdir>/specgate-cache-<primary pid>-<random>`), created by the primary before it forks
 * its workers and removed when the primary exits. Workers learn it from GATEWAY_CACHE_DIR (inherited
 * through cluster.fork). A primary killed with SIGKILL cannot remove its directory: the next primary
 * to start removes the directories of primaries that are no longer running, and any named with its own
 * pid (pids are reused: 32,768 of them by default on Linux).
 *
 * The primary creates LMDB's two files in it too, empty (LMDB sets up an empty file as a new
 * environment), so that what makes the environment is known from the start: the directory and those
 * files, each by its inode. InstanceCacheDir.check() finds one of them gone or another file (a tmp
 * cleaner, by hand) and creates a new directory, which every worker then moves to (lmdb-env.ts); a
 * worker that finds one missing as it opens the environment says so at once (instanceDirIntact).
 */
import { closeSync, mkdtempSync, openSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const CACHE_DIR_ENV = 'GATEWAY_CACHE_DIR';
const PREFIX = 'specgate-cache-';
/** The directory itself (''), and LMDB's files. */
const PARTS = ['', 'data.mdb', 'lock.mdb'] as const;

export class InstanceCacheDir {
  private identity: string;
  /**
   * The directory and its files held open: an inode number is free for a new file once the last link
   * and descriptor of the old one are gone, and ext4 hands it out again at once (a lock file
   * removed and made anew had the same number), so without these the check would miss a replaced file.
   * Safe beside LMDB's locks only because the primary never opens the environment itself: closing any
   * descriptor of a file drops every POSIX record lock the closing process holds on it.
   */
  private pins: number[];

  constructor(public path: string) {
    this.pins = pin(path);
    this.identity = identity(path);
  }

  /**
   * Null while the directory and its files are those created; else one was removed or replaced, and
   * this is the new directory made in place of the old (GATEWAY_CACHE_DIR names it for workers forked
   * from now on). Throws when no new directory can be made (the old one stays named).
   */
  check(): { was: string; now: string } | null {
    if (identity(this.path) === this.identity) return null;
    const was = this.path;
    const now = makeDir();
    try {
      // What a worker may have created at the old path (LMDB makes a missing directory): nobody is to use it.
      rmSync(was, { recursive: true, force: true });
    } catch {
      // Left to the next primary's sweep of directories of primaries no longer running.
    }
    unpin(this.pins);
    this.path = now;
    this.pins = pin(now);
    this.identity = identity(now);
    return { was, now };
  }
}

/** Descriptors of the directory and its files (those that exist). */
function pin(dir: string): number[] {
  const fds: number[] = [];
  for (const name of PARTS) {
    try {
      fds.push(openSync(join(dir, name), 'r'));
    } catch {
      // Missing already: check() finds it so.
    }
  }
  return fds;
}

function unpin(fds: number[]): void {
  for (const fd of fds) {
    try {
      closeSync(fd);
    } catch {
      // Closed already.
    }
  }
}

/** The inodes of the directory and its files ('-' for one that is missing). */
function identity(dir: string): string {
  return PARTS.map((name) => {
    try {
      const stat = statSync(join(dir, name));
      return `${stat.dev}:${stat.ino}`;
    } catch {
      return '-';
    }
  }).join(' ');
}

/** In a worker: the directory and LMDB's files in it are all there (else it was cleaned away). */
export function instanceDirIntact(dir: string): boolean {
  return !identity(dir).split(' ').includes('-');
}

let current: InstanceCacheDir | null = null;

/** Creates the instance's directory, removes it at exit, and tells workers forked later where it is. */
export function createInstanceCacheDir(): InstanceCacheDir {
  removeOrphans();
  current = new InstanceCacheDir(makeDir());
  process.on('exit', () => {
    if (current !== null) rmSync(current.path, { recursive: true, force: true });
  });
  return current;
}

function makeDir(): string {
  const dir = mkdtempSync(join(tmpdir(), `${PREFIX}${process.pid}-`));
  for (const name of PARTS) if (name !== '') writeFileSync(join(dir, name), '');
  process.env[CACHE_DIR_ENV] = dir;
  return dir;
}

/** The instance's directory in a worker; undefined outside a cluster (a standalone data plane). */
export function instanceCacheDir(): string | undefined {
  const dir = process.env[CACHE_DIR_ENV];
  return dir === undefined || dir === '' ? undefined : dir;
}

/** In a worker: the primary moved the instance's directory there. */
export function setInstanceCacheDir(dir: string): void {
  process.env[CACHE_DIR_ENV] = dir;
}

function removeOrphans(): void {
  let names: string[];
  try {
    names = readdirSync(tmpdir());
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(PREFIX)) continue;
    const pid = Number.parseInt(name.slice(PREFIX.length), 10);
    // One named with this process's pid is not this process's (it has made none yet): the pid was
    // reused after the primary that made it was killed.
    if (!Number.isInteger(pid) || pid <= 0 || (pid !== process.pid && alive(pid))) continue;
    rmSync(join(tmpdir(), name), { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
