// `npm start` is the README's first command. SIGTERM (or Ctrl-C's SIGINT) to npm's own process must
// stop every process of the gateway: the primary, its workers and the example upstreams. npm forwards
// the signal to the script's process; the script execs node, so that process is the gateway's primary.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { eventually, httpRequest } from '../helpers/gateway-process.js';
import { holdExamplePorts } from '../helpers/machine-lock.js';
import { reapOnExit } from '../helpers/reaper.js';
import { untapped } from '../helpers/untapped.js';
import { within } from '../helpers/within.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

function parentOf(pid: string): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

/** Every process below `pid`. */
function descendants(pid: number): number[] {
  const all = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  const found: number[] = [];
  let frontier = [pid];
  while (frontier.length > 0) {
    const next = all.filter((p) => frontier.includes(parentOf(p) ?? -1)).map(Number);
    found.push(...next);
    frontier = next;
  }
  return found;
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

// npm start runs the example upstreams on their fixed ports.
await holdExamplePorts(t);

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  t.test(`${signal} to npm start's process stops every gateway process`, async (t) => {
    const port = 18000 + Math.floor(Math.random() * 2000);
    const npm = spawn(...untapped('npm', ['start', '--silent']), {
      cwd: ROOT,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, GATEWAY_PORT: String(port), GATEWAY_WORKERS: '1' },
    });
    const unreap = reapOnExit(npm, { group: true });
    let output = '';
    npm.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    npm.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
    t.teardown(() => {
      try {
        process.kill(-npm.pid!, 'SIGKILL');
      } catch {
        // gone
      }
      unreap();
    });
    await eventually(async () => ((await httpRequest(port, '/api/users/42')).status === 200 ? true : undefined), 60_000, 200, `the demo answering (output: ${output})`);
    const processes = descendants(npm.pid!);
    t.ok(processes.length >= 3, `primary, worker and example upstreams run under npm (${processes.length} processes)`);
    process.kill(npm.pid!, signal);
    const code = await within(exited, 30_000, 'npm still running');
    t.not(code, 'npm still running', 'npm exits');
    await eventually(async () => (processes.every((pid) => !alive(pid)) ? true : undefined), 15_000, 100, 'every process of the gateway gone');
    t.same(processes.filter(alive), [], 'no process left behind');
    t.notMatch(output, /EADDRINUSE|\n\s+at /, 'no stack trace');
  });
}
