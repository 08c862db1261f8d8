import { statSync } from 'node:fs';
import { dirname } from 'node:path';

/**
 * Why a log file cannot be appended to at `path` (absolute), or null: checked when a config is loaded, for
 * every file the gateway appends to (accessLog.destination, a listener's mismatchLog). A file that is not
 * there yet is created, in a directory that must exist.
 */
export function appendPathProblem(path: string): string | null {
  try {
    if (statSync(path).isDirectory()) return `${path} is a directory; name a file in it`;
    return null;
  } catch {
    // Not there yet.
  }
  try {
    if (statSync(dirname(path)).isDirectory()) return null;
    return `${dirname(path)} is not a directory`;
  } catch {
    return `the directory ${dirname(path)} does not exist`;
  }
}
