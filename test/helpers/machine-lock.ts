/**
 * A lock shared by every test process on the machine, for tests that need something only one of them
 * can have at a time: the example upstreams' fixed ports (9101-9104) that `npm start` and the shipped
 * configs use. Tap runs test files in parallel; a file that takes the lock waits for the other one.
 *
 * The lock is a directory (mkdir is atomic) holding the owner's pid; a lock whose owner is gone (a
 * test killed mid-run) is taken over.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

function ownerAlive(dir: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(join(dir, 'pid'), 'utf8'));
  } catch {
    // Being created right now (mkdir done, pid not yet written): treat as alive.
    return true;
  }
  if (!(pid > 0)) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Waits until this process holds the lock `name`; the returned function releases it. */
export async function machineLock(name: string, timeoutMs = 240_000): Promise<() => void> {
  const dir = join(tmpdir(), `specgate-test-lock-${name}`);
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      mkdirSync(dir);
      writeFileSync(join(dir, 'pid'), String(process.pid));
      return () => rmSync(dir, { recursive: true, force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (!ownerAlive(dir)) {
      rmSync(dir, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`the test lock ${dir} is still held by another test after ${timeoutMs} ms`);
    await sleep(250);
  }
}

/** The example upstreams' fixed ports, held until the test `t` ends. */
export async function holdExamplePorts(t: { teardown(fn: () => void): void }): Promise<void> {
  const release = await machineLock('example-ports');
  t.teardown(release);
}
