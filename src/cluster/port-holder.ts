import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** A process that listens on a port, as far as /proc lets this user see it. */
export interface PortHolder {
  pid: number;
  command: string;
  /** When the holder is a gateway's worker: its primary (the process to stop). */
  gatewayPid?: number;
}

/** The socket inodes listening on `port` (any address), from /proc/net/tcp and tcp6. */
function listeningInodes(port: number): Set<string> {
  const inodes = new Set<string>();
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      if (fields.length < 10 || fields[3] !== '0A') continue;
      if (fields[1]!.split(':')[1] === hexPort) inodes.add(fields[9]!);
    }
  }
  inodes.delete('0');
  return inodes;
}

/** Which of `inodes` process `pid` has open (none when its descriptors cannot be read). */
function heldSockets(pid: number, inodes: ReadonlySet<string>): string[] {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return [];
  }
  const held: string[] = [];
  for (const fd of fds) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      if (target.startsWith('socket:[') && inodes.has(target.slice(8, -1))) held.push(target.slice(8, -1));
    } catch {
      // Closed meanwhile.
    }
  }
  return held;
}

function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
  } catch {
    return '';
  }
}

/** A gateway worker's command line: the compiled module or the bundle (src/cluster/entry-files.ts). */
const GATEWAY_WORKER_COMMAND = /cluster[/\\]worker\.js|bundle[/\\]worker\.mjs/;

function parentOf(pid: number): number | undefined {
  try {
    // pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return undefined;
  }
}

/**
 * The processes listening on `port`, found by matching the listening sockets' inodes against every
 * process's open descriptors. Empty when /proc is not there (not Linux) or the holder belongs to
 * another user (its descriptors are not readable).
 */
export function portHolders(port: number): PortHolder[] {
  return holdersOf(listeningInodes(port));
}

function holdersOf(inodes: ReadonlySet<string>): PortHolder[] {
  if (inodes.size === 0) return [];
  const holders: PortHolder[] = [];
  let pids: string[];
  try {
    pids = readdirSync('/proc').filter((name) => /^\d+$/.test(name));
  } catch {
    return [];
  }
  for (const name of pids) {
    const pid = Number(name);
    if (pid === process.pid || heldSockets(pid, inodes).length === 0) continue;
    const command = commandOf(pid);
    const holder: PortHolder = { pid, command };
    if (GATEWAY_WORKER_COMMAND.test(command)) {
      const parent = parentOf(pid);
      if (parent !== undefined && parent > 1) holder.gatewayPid = parent;
    }
    holders.push(holder);
  }
  return holders;
}

const MAX_COMMAND = 120;

/** "pid 123 (nginx: master process)" or "the gateway with pid 99 (node .../main.js start ...)"; null when unknown. */
export function describeHolders(holders: readonly PortHolder[]): string | null {
  if (holders.length === 0) return null;
  const gateways = [...new Set(holders.flatMap((h) => (h.gatewayPid === undefined ? [] : [h.gatewayPid])))];
  const short = (command: string) => (command.length > MAX_COMMAND ? `${command.slice(0, MAX_COMMAND - 3)}...` : command);
  if (gateways.length > 0) {
    return gateways.map((pid) => `another gateway (pid ${pid}: ${short(commandOf(pid)) || 'command unknown'})`).join(', ');
  }
  return holders.map((h) => `pid ${h.pid} (${short(h.command) || 'command unknown'})`).join(', ');
}

/** When a process started, in clock ticks since boot (field 22 of /proc/PID/stat); undefined when unknown. */
export function startTimeOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const value = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
    return Number.isFinite(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Another process that listens on `port` beside this gateway's own processes and was there first
 * (two gateways started at the same moment both pass the probe: the younger one gives way). Null when none.
 */
export function olderSharer(port: number, own: ReadonlySet<number>): string | null {
  // Each process that binds the port with SO_REUSEPORT has a listening socket of its own: when this
  // gateway's processes hold every one there is, no other process can share the port, and the walk over
  // every process's descriptors (most of this check's cost at each start: 15-30 ms of the primary) is
  // not needed.
  const inodes = listeningInodes(port);
  for (const pid of own) for (const inode of heldSockets(pid, inodes)) inodes.delete(inode);
  const others = holdersOf(inodes).filter((h) => !own.has(h.pid));
  if (others.length === 0) return null;
  const key = (pid: number): [number, number] => [startTimeOf(pid) ?? Number.MAX_SAFE_INTEGER, pid];
  const mine = key(process.pid);
  const older = others.filter((h) => {
    const theirs = key(h.gatewayPid ?? h.pid);
    return theirs[0] < mine[0] || (theirs[0] === mine[0] && theirs[1] < mine[1]);
  });
  return describeHolders(older);
}
