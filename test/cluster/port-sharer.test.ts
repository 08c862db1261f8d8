// olderSharer (src/cluster/port-holder.ts), which a primary runs once its workers listen: of two
// gateways whose workers share a port (SO_REUSEPORT), the younger one learns that the older was there
// first. Two listener processes stand for the two gateways; each is asked with its own set of pids, so
// both ways through the check are taken: every listening socket is one of the asker's (no walk over
// other processes), and one is another process's.
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import t from 'tap';
import { findFreePort } from '../../src/cluster/free-port.js';
import type { Teardown } from '../helpers/gateway-process.js';
import { untapped } from '../helpers/untapped.js';

const UWS = new URL('../../src/native/uws.js', import.meta.url).href;
const HOLDER = new URL('../../src/cluster/port-holder.js', import.meta.url).href;

// Listens on the port with uWS (SO_REUSEPORT, as a worker does), says "listening", then answers each
// line of pids with olderSharer's verdict for itself with those pids as its own.
const LISTENER = `
import { createInterface } from 'node:readline';
const { loadUws } = await import(${JSON.stringify(UWS)});
const { olderSharer } = await import(${JSON.stringify(HOLDER)});
const port = Number(process.argv[1]);
const { uws } = loadUws();
uws.App().listen('127.0.0.1', port, (socket) => {
  if (!socket) { console.log(JSON.stringify({ error: 'listen failed' })); process.exit(1); }
  console.log(JSON.stringify({ listening: process.pid }));
});
for await (const line of createInterface({ input: process.stdin })) {
  const own = new Set([process.pid, ...line.split(' ').filter(Boolean).map(Number)]);
  console.log(JSON.stringify({ older: olderSharer(port, own) }));
}
`;

interface Listener {
  child: ChildProcess;
  pid: number;
  ask(ownPids: number[]): Promise<string | null>;
}

async function listener(t: Teardown, port: number): Promise<Listener> {
  const [command, args] = untapped(process.execPath, ['--input-type=module', '-e', LISTENER, String(port)]);
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  t.teardown(() => {
    child.kill('SIGKILL');
  });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const next = async (): Promise<Record<string, unknown>> => JSON.parse(String((await lines.next()).value)) as Record<string, unknown>;
  const first = await next();
  if (typeof first.listening !== 'number') throw new Error(`listener: ${JSON.stringify(first)}`);
  return {
    child,
    pid: first.listening,
    ask: async (ownPids) => {
      child.stdin!.write(`${ownPids.join(' ')}\n`);
      return (await next()).older as string | null;
    },
  };
}

t.test('the younger of two processes sharing a port names the older; the older and a process owning every socket find none', async (t) => {
  const port = await findFreePort('127.0.0.1');
  const older = await listener(t, port);
  t.equal(await older.ask([]), null, 'alone on the port: nothing else listens');
  // Start times are in clock ticks (10 ms): the younger must start at least a tick later.
  await new Promise((resolve) => setTimeout(resolve, 50));
  const younger = await listener(t, port);

  const named = await younger.ask([]);
  t.match(named, new RegExp(`^pid ${older.pid} \\(`), 'the younger is told the older holds the port');
  t.match(named, /--input-type=module/, 'with its command line');
  t.equal(await older.ask([]), null, 'the older gives way to no one');
  t.equal(await younger.ask([older.pid]), null, 'every listening socket is the asker\'s own: none');
  t.equal(await older.ask([younger.pid]), null, 'the same, from the older side');
});
