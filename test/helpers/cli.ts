/** Runs the built `gateway` CLI (dist/bundle/gateway.mjs, as `npm start` and the `gateway` bin do) as a child process. */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { untapped } from './untapped.js';

const run = promisify(execFile);
const CLI = fileURLToPath(new URL('../../bundle/gateway.mjs', import.meta.url));

/** `gateway <args>`: its exit code and output (a failing command is an answer, not a throw). */
export async function gateway(...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(...untapped(process.execPath, [CLI, ...args]));
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}
