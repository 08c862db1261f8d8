/**
 * Where the `local` response cache of an instance lives: one directory under the OS temporary
 * directory (`<tmpdir>/specgate-cache-<primary pid>-<random>`), created by the primary before it forks
 * its workers and removed when the primary exits. Workers learn it from GATEWAY_CACHE_DIR (inherited
 * through cluster.fork). A primary killed with SIGKILL cannot remove its directory: the next primary
 * to start removes the directories of primaries that are no longer running.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const CACHE_DIR_ENV = 'GATEWAY_CACHE_DIR';
const PREFIX = 'specgate-cache-';

/** Creates the instance's directory, removes it at exit, and tells workers forked later where it is. */
export function createInstanceCacheDir(): string {
  removeOrphans();
  const dir = mkdtempSync(join(tmpdir(), `${PREFIX}${process.pid}-`));
  process.env[CACHE_DIR_ENV] = dir;
  process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** The instance's directory in a worker; undefined outside a cluster (a standalone data plane). */
export function instanceCacheDir(): string | undefined {
  const dir = process.env[CACHE_DIR_ENV];
  return dir === undefined || dir === '' ? undefined : dir;
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
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid || alive(pid)) continue;
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
