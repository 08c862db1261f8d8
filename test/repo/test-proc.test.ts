// test/helpers/proc.ts: the ports a process listens on, read from /proc, also on a host whose kernel has
// no IPv6 (no /proc/<pid>/net/tcp6 at all).
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { listeningPorts } from '../helpers/proc.js';

const HEAD = '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode';
/** One row of /proc/net/tcp: `port` on 0.0.0.0 in state `st` (0A is LISTEN), owned by socket `inode`. */
const row = (port: number, st: string, inode: number) =>
  `   0: 00000000:${port.toString(16).toUpperCase().padStart(4, '0')} 00000000:0000 ${st} 00000000:00000000 00:00000000 00000000     0        0 ${inode} 1 0000000000000000 100 0 0 10 0`;

t.test('a process listening on a port: the helper finds it in the real /proc', async (t) => {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => server.close());
  const port = (server.address() as { port: number }).port;
  t.ok(listeningPorts(process.pid).includes(port), `port ${port} is listed`);
});

t.test('a kernel without IPv6: the missing tcp6 table is skipped, the IPv4 listeners are still found', async (t) => {
  const proc = mkdtempSync(join(tmpdir(), 'specgate-proc-'));
  t.teardown(() => rmSync(proc, { recursive: true, force: true }));
  mkdirSync(join(proc, '42', 'fd'), { recursive: true });
  mkdirSync(join(proc, '42', 'net'));
  symlinkSync('socket:[1001]', join(proc, '42', 'fd', '3'));
  symlinkSync('socket:[1002]', join(proc, '42', 'fd', '4'));
  symlinkSync('/dev/null', join(proc, '42', 'fd', '5'));
  // 8080 is this process's and listens; 8081 is this process's but connected; 9090 listens in another process.
  writeFileSync(join(proc, '42', 'net', 'tcp'), [HEAD, row(8080, '0A', 1001), row(8081, '01', 1002), row(9090, '0A', 2001), ''].join('\n'));
  t.same(listeningPorts(42, proc), [8080]);
});
