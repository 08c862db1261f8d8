// On-CPU time of a contender: every thread of every process in its process group (each contender is
// started detached, so its pid is its group's id), read from /proc. Empty (0) where there is no /proc.
import { readdirSync, readFileSync } from 'node:fs';

/** On-CPU time (ns) of every thread of every process in process group `pgid`. */
export function groupCpuNs(pgid: number): number {
  let ns = 0;
  for (const pid of groupPids(pgid)) {
    try {
      ns += processCpuNs(pid);
    } catch {
      // gone meanwhile
    }
  }
  return ns;
}

/** What the scheduler did to a process group's threads, summed: see groupSched. */
export interface SchedCounts {
  /** On-CPU time (ns). */
  runNs: number;
  /** Time runnable but waiting for a CPU (ns). */
  waitNs: number;
  /** Times a thread was switched out while it still wanted to run (preempted). */
  preempted: number;
}

/**
 * On-CPU time, run-queue wait and involuntary context switches of every thread of every process in
 * process group `pgid` (/proc/<pid>/task/<tid>/schedstat and status). Zeros where there is no /proc.
 */
export function groupSched(pgid: number): SchedCounts {
  const counts = { runNs: 0, waitNs: 0, preempted: 0 };
  for (const pid of groupPids(pgid)) {
    try {
      for (const task of readdirSync(`/proc/${pid}/task`)) {
        const [run, wait] = readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ');
        const status = readFileSync(`/proc/${pid}/task/${task}/status`, 'utf8');
        counts.runNs += Number(run);
        counts.waitNs += Number(wait);
        counts.preempted += Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0);
      }
    } catch {
      // gone meanwhile
    }
  }
  return counts;
}

/** The pids of process group `pgid`; empty where there is no /proc. */
function groupPids(pgid: number): string[] {
  const pids: string[] = [];
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return pids;
  }
  for (const pid of entries) {
    if (pid.charCodeAt(0) > 0x39) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      // Fields after "(comm) ": state ppid pgrp ...
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]) === pgid) pids.push(pid);
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** On-CPU time (ns) of every thread of process `pid`; throws when it is gone. */
export function processCpuNs(pid: number | string): number {
  let ns = 0;
  for (const task of readdirSync(`/proc/${pid}/task`)) ns += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, 'utf8').split(' ')[0]);
  return ns;
}
