// Workers that crash-loop after a good start do not take the primary down: it respawns them with a
// growing back-off, and the gateway serves again once the cause is gone. Here the cause is a socket
// without SO_REUSEPORT that takes the port while the workers are down, so every new worker exits at
// listen. (A port held before the start is refused at once: test/cluster/cluster-port-held.test.ts.)
import { childrenOf } from '../helpers/proc.js';
import { createServer, type Server } from 'node:net';
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

const upstream = await startUpstream(t, { name: 'backend' });


/** node:net does not set SO_REUSEPORT: while this listens, no worker can. */
function tryToHold(port: number): Promise<Server | null> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(null));
    server.listen({ host: '127.0.0.1', port, exclusive: true }, () => resolve(server));
  });
}

t.test('the primary outlives workers that crash-loop after a good start, and recovers when the cause goes', async (t) => {
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/ok' }] }]),
    waitFor: (l) => l.msg === 'gateway operational',
    startTimeoutMs: 60_000,
  });
  const port = gateway.port;
  t.equal((await httpRequest(port, '/ok')).status, 200, 'a good start');

  // Kill the workers and take the port before their replacements bind it (retried: a replacement may win).
  const blocker = await eventually(
    async () => {
      for (const pid of childrenOf(gateway.child.pid!)) process.kill(pid, 'SIGKILL');
      return (await tryToHold(port)) ?? undefined;
    },
    30_000,
    20,
    'the port taken while the workers are down',
  );
  t.teardown(() => new Promise<void>((resolve) => (blocker.listening ? blocker.close(() => resolve()) : resolve())));

  const exits = () => gateway.lines.filter((l) => /worker exited with code 1; replacing it/.test(String(l.msg)));
  // Each exit needs a worker to start and fail at listen: generous on a loaded machine.
  await eventually(async () => (exits().length >= 2 && exits().some((l) => Number(l.respawnInMs) >= 500) ? true : undefined), 90_000, 50, 'two exits at listen and a back-off of 500 ms or more');
  t.ok(exits().length >= 2, `workers kept exiting at listen (${exits().length} exits)`);
  t.ok(gateway.lines.some((l) => l.level === 60 && /could not start serving/.test(String(l.msg))), 'the workers say why they exit');
  t.equal(gateway.child.exitCode, null, 'the primary is still running');
  const delays = exits().map((l) => Number(l.respawnInMs));
  t.ok(delays.every((d) => d <= 30_000), 'back-off is bounded');

  await new Promise<void>((resolve) => blocker.close(() => resolve()));
  const served = await eventually(
    async () => {
      const res = await httpRequest(port, '/ok', { timeoutMs: 2000 });
      return res.status === 200 ? res : undefined;
    },
    60_000,
    100,
    'a routed request answered once the port is free',
  );
  t.equal(JSON.parse(served.body).upstream, 'backend');
  t.equal((await httpRequest(port, '/healthcheck')).status, 200);

  gateway.signal('SIGTERM');
  t.same(await gateway.exited, { code: 0, signal: null }, 'and it still stops cleanly');
});
