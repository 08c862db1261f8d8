// test/helpers/reaper.ts: a test process killed the way tap kills one that overruns its timeout
// (SIGKILL, no teardown) leaves none of the children it registered running; a child it unregistered is
// left alone.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { untapped } from '../helpers/untapped.js';

const REAPER = fileURLToPath(new URL('../helpers/reaper.js', import.meta.url));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(predicate: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (predicate()) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return predicate();
}

/**
 * A stand-in for a test process: starts a detached process group (a shell with a sleeping child) and
 * a plain child, registers both (or unregisters them again with `unregister`), prints their pids and
 * waits to be killed.
 */
function testProcess(unregister: boolean): Promise<{ pid: number; group: number; grandchild: number; plain: number }> {
  const script = `
    import { spawn } from 'node:child_process';
    import { reapOnExit } from ${JSON.stringify(REAPER)};
    const group = spawn('sh', ['-c', 'sleep 300 & echo $!; wait'], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
    const plain = spawn('sleep', ['300'], { stdio: 'ignore' });
    const done = [reapOnExit(group, { group: true }), reapOnExit(plain, { group: false })];
    if (${unregister}) for (const unreap of done) unreap();
    group.stdout.once('data', (chunk) => {
      console.log(JSON.stringify({ group: group.pid, grandchild: Number(String(chunk).trim()), plain: plain.pid }));
    });
    setInterval(() => {}, 1000);
  `;
  const child = spawn(...untapped(process.execPath, ['--input-type=module', '-e', script]), { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    createInterface({ input: child.stdout! }).once('line', (line) => resolve({ pid: child.pid!, ...(JSON.parse(line) as { group: number; grandchild: number; plain: number }) }));
  });
}

t.test('SIGKILL to the test process: every registered child, and the group of a detached one, is killed', async (t) => {
  const started = await testProcess(false);
  const pids = [started.group, started.grandchild, started.plain];
  t.teardown(() => {
    for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });
  t.ok(pids.every(alive), 'all three run while the test process does');
  process.kill(started.pid, 'SIGKILL');
  t.ok(await until(() => !pids.some(alive), 10_000), `none left running (alive: ${pids.filter(alive).join(', ') || 'none'})`);
});

t.test('a child unregistered before the test process dies keeps running', async (t) => {
  const started = await testProcess(true);
  const pids = [started.group, started.grandchild, started.plain];
  t.teardown(() => {
    try {
      process.kill(-started.group, 'SIGKILL');
    } catch {
      // gone
    }
    for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL');
  });
  process.kill(started.pid, 'SIGKILL');
  // Time for a reaper to act if it (wrongly) were going to.
  await new Promise((resolve) => setTimeout(resolve, 1500));
  t.ok(pids.every(alive), 'still running');
});
