// Test support: what /proc says about a process (Linux only): the TCP ports it listens on, whether it is gone.
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** The TCP ports `pid` listens on (any address, IPv4 and IPv6), from its descriptors' socket inodes.
 * `proc` is where procfs is mounted (a test of this helper passes a made-up one). */
export function listeningPorts(pid: number, proc = '/proc'): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`${proc}/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`${proc}/${pid}/fd/${fd}`));
      if (match) inodes.add(match[1]!);
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set<number>();
  for (const table of ['tcp', 'tcp6']) {
    // A kernel without IPv6 (booted with ipv6.disable=1) has no tcp6 table.
    const path = `${proc}/${pid}/net/${table}`;
    if (!existsSync(path)) continue;
    for (const line of readFileSync(path, 'utf8').split('\n').slice(1)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      const fields = line.trim().split(/\s+/);
      if (fields.length >= 10 && fields[3] === '0A' && inodes.has(fields[9]!)) ports.add(parseInt(fields[1]!.split(':')[1]!, 16));
    }
  }
  return [...ports].sort((a, b) => a - b);
}

/** True once `pid` has exited: no such process, or a zombie nobody reaped yet (an orphan's new parent may not). */
export function processGone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

/** The pids of a process's children (a primary's workers), from /proc. */
export function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) children.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return children;
}
