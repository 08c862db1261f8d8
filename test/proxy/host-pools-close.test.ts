// UpstreamPools.close(graceMs) ends within the grace even when nothing else keeps the process alive:
// a call whose reading is paused (a slow client downstream) holds a socket libuv does not count as
// active, so a grace timer that did not hold the process either let it exit with close() never
// settled (a worker's shutdown, a test's teardown cut short). Run in a child process, where an empty
// event loop means exit.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { untapped } from '../helpers/untapped.js';

const hostPools = fileURLToPath(new URL('../../src/proxy/host-pools.js', import.meta.url));

const script = `
import net from 'node:net';
const { UpstreamPools } = await import(process.argv[2]);
const server = net.createServer((socket) => {
  socket.unref();
  socket.once('data', () => socket.write('HTTP/1.1 200 OK\\r\\ncontent-length: 1000000\\r\\n\\r\\n' + 'x'.repeat(1000)));
});
server.listen(0, '127.0.0.1', () => {
  server.unref();
  const pools = new UpstreamPools({ connectMs: 5000, upstreamMs: 60000, connections: 4, maxQueue: 4, idleTimeoutMs: 4000, maxResponseHeaderBytes: 16384 });
  const pool = pools.get('http://127.0.0.1:' + server.address().port);
  pool.request('GET', '/', ['host', 'upstream'], null, {
    onHead(status) {
      console.log('head ' + status);
      const started = Date.now();
      pools.close(300).then(() => console.log('closed after grace ' + (Date.now() - started >= 250)));
      return false; // paused: the client socket stops reading
    },
    onData: () => true,
    onEnd: () => console.log('end'),
    onError: (err) => console.log('error ' + err.code),
    onBodyDrain() {},
  });
});
`;

t.test('close(graceMs) settles after the grace while a paused call is all that is left', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-host-pools-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'close.mjs');
  writeFileSync(file, script);
  const [command, args] = untapped(process.execPath, [file, hostPools]);
  const stdout = await new Promise<string>((resolve, reject) => {
    execFile(command, args, { timeout: 20_000 }, (err, out, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(out)));
  });
  t.same(stdout.trim().split('\n'), ['head 200', 'error CLOSED', 'closed after grace true'], 'the paused call is cut with CLOSED at the grace, and close() settles');
});
