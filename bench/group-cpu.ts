// On-CPU time of a contender: every thread of every process in its process group (each contender is
// started detached, so its pid is its group's id), read from /proc. Empty (0) where there is no /proc.
import { readdirSync, readFileSync } from 'node:fs';

/** On-CPU time (ns) of every thread of every process in process group `pgid`. */
export function groupCpuNs(pgid: number): number {
  let ns = 0;
  for (const pid of readdirSync('/proc')) {
    if (pid.charCodeAt(0) > 0x39) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // Fields after "(comm) ": state ppid pgrp ...
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) !== pgid) continue;
      ns += processCpuNs(pid);
    } catch {
      // gone meanwhile, or no /proc (then the column stays empty)
    }
  }
  return ns;
}

/** On-CPU time (ns) of every thread of process `pid`; throws when it is gone. */
export function processCpuNs(pid: number | string): number {
  let ns = 0;
  for (const task of readdirSync(`/proc/${pid}/task`)) ns += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
  return ns;
}
