// Kernel settings a test's outcome depends on, read as the machine has them: tests never change them,
// they assert what the setting in force promises.
import { readFileSync } from 'node:fs';

function ipv4(name: string): string | null {
  try {
    return readFileSync(`/proc/sys/net/ipv4/${name}`, 'utf8').trim();
  } catch {
    return null;
  }
}

/** net.ipv4.tcp_migrate_req is on: a closing listener's queued connections move to another listener on its port. */
export function migratesQueuedConnections(): boolean {
  return ipv4('tcp_migrate_req') === '1';
}

/** The largest size autotuning gives a TCP buffer (the third figure of net.ipv4.tcp_wmem / tcp_rmem). */
export function tcpBufferMax(name: 'tcp_wmem' | 'tcp_rmem'): number {
  const figures = (ipv4(name) ?? '').split(/\s+/).map(Number);
  const max = figures[2];
  if (max === undefined || !Number.isFinite(max)) throw new Error(`net.ipv4.${name} could not be read`);
  return max;
}
