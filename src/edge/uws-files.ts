/**
 * uWS reads certificates and keys from files only (SSLApp, addServerName). These hand it texts as
 * files that do not outlive the call: on Linux the files are unlinked before uWS reads them, through
 * the process's own descriptors (/proc/self/fd/N), so nothing is left on disk even when the process
 * dies inside uWS. Where those paths cannot be read (no /proc), the files sit in a private directory
 * removed as soon as uWS returns.
 */
import { accessSync, closeSync, constants, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Runs `use` with one file name per text, each holding that text (mode 0600 in a 0700 directory). */
export function withTextFiles<T>(texts: readonly string[], use: (paths: string[]) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-tls-'));
  const descriptors: number[] = [];
  let paths: string[];
  try {
    const files = texts.map((text, i) => {
      const path = join(dir, String(i));
      writeFileSync(path, text, { mode: 0o600 });
      return path;
    });
    paths = files.map((path) => {
      const fd = openSync(path, 'r');
      descriptors.push(fd);
      return `/proc/self/fd/${fd}`;
    });
    if (!paths.every(readable)) {
      paths = files;
      closeAll(descriptors);
    }
  } catch (err) {
    closeAll(descriptors);
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const unlinkedFirst = descriptors.length > 0;
  if (unlinkedFirst) rmSync(dir, { recursive: true, force: true });
  try {
    return use(paths);
  } finally {
    closeAll(descriptors);
    if (!unlinkedFirst) rmSync(dir, { recursive: true, force: true });
  }
}

function readable(path: string): boolean {
  try {
    accessSync(path, constants.R_OK);
    return true;
  } catch {
    return false;
  }
}

function closeAll(descriptors: number[]): void {
  for (const fd of descriptors.splice(0)) closeSync(fd);
}
