// Test support: what a test file started does not outlive it, even when its teardowns never run.
//
// tap ends a file that overruns its timeout with SIGALRM and then SIGKILL, and no teardown runs: a
// gateway the file started (its own process group: primary, workers) would keep running, holding
// ports and CPU on a two-core machine for the files after it. So each test process that registers a
// child starts one reaper: a bash (its kill takes a process group, dash's does not) in a session of
// its own, whose stdin is a pipe from the test process. It reads `+ id` and `- id` lines (a pid, or
// -pgid for a whole process group); when its stdin closes, which happens however the test process
// ended, it SIGKILLs every id still registered. A teardown that stopped its child unregisters it, so
// a pid the system reuses later is never hit.
import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';

const SCRIPT = `
live=" "
while read -r op id; do
  case "$op" in
    +) live="$live$id " ;;
    -) case "$live" in *" $id "*) live="\${live%% $id *} \${live#* $id }" ;; esac ;;
  esac
done
for id in $live; do kill -9 -- "$id" 2>/dev/null; done
`;

let reaper: ChildProcess | null = null;

function send(line: string): void {
  if (reaper === null) {
    reaper = spawn('bash', ['-c', SCRIPT], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
    reaper.on('error', () => {});
    reaper.stdin!.on('error', () => {});
    // Neither the shell nor the pipe keeps the test process alive.
    reaper.unref();
    (reaper.stdin as Socket).unref();
  }
  reaper.stdin!.write(line + '\n');
}

/**
 * Has `child` killed, or with `group` its whole process group, if this process ends before the
 * returned function is called. A single process is unregistered by itself when it exits; a group
 * (whose leader may exit before the rest) once the caller has stopped it and calls the function.
 */
export function reapOnExit(child: ChildProcess, { group }: { group: boolean }): () => void {
  const pid = child.pid;
  if (pid === undefined) return () => {};
  const id = group ? -pid : pid;
  send(`+ ${id}`);
  let registered = true;
  const unreap = (): void => {
    if (!registered) return;
    registered = false;
    send(`- ${id}`);
  };
  if (!group) child.once('exit', unreap);
  return unreap;
}
