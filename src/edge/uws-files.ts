/**
 * uWS reads certificates and keys from files only (SSLApp, addServerName). These hand it texts as
 * files that do not outlive the call: on Linux the files are unlinked before uWS reads them, through
 * the process's own descriptors (/proc/self/fd/N), so nothing is left on disk even when the process
 * dies inside uWS. Elsewhere they sit in a private directory removed as soon as uWS returns.
 */
import { closeSync, existsSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const PROC_FDS = existsSync('/proc/self/fd');

/** Runs `use` with one file name per text, each holding that text (mode 0600 in a 0700 directory). */
export function withTextFiles<T>(texts: readonly string[], use: (paths: string[]) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-tls-'));
  const descriptors: number[] = [];
  let paths: string[];
  try {
    paths = texts.map((text, i) => {
      const path = join(dir, String(i));
      writeFileSync(path, text, { mode: 0o600 });
      if (!PROC_FDS) return path;
      const fd = openSync(path, 'r');
      descriptors.push(fd);
      return `/proc/self/fd/${fd}`;
    });
  } catch (err) {
    for (const fd of descriptors) closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  if (PROC_FDS) rmSync(dir, { recursive: true, force: true });
  try {
    return use(paths);
  } finally {
    for (const fd of descriptors) closeSync(fd);
    if (!PROC_FDS) rmSync(dir, { recursive: true, force: true });
  }
}
