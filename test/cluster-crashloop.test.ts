// Workers that crash-loop (here: the port is held by a socket without SO_REUSEPORT, so every worker
// exits at listen) do not take the primary down: it respawns them with a growing back-off, and the
// gateway serves once the cause is gone.
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from './helpers/gateway-process.js';

const upstream = await startUpstream(t, { name: 'backend' });

// node:net does not set SO_REUSEPORT, so the workers' listen on this port fails.
const blocker = createServer();
await new Promise<void>((resolve) => blocker.listen({ host: '127.0.0.1', port: 0, exclusive: true }, resolve));
const port = (blocker.address() as AddressInfo).port;
t.teardown(() => new Promise<void>((resolve) => (blocker.listening ? blocker.close(() => resolve()) : resolve())));

t.test('the primary outlives crash-looping workers, and recovers when the cause goes', async (t) => {
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/ok' }] }]),
    port,
    waitForListening: false,
  });
  const exits = () => gateway.lines.filter((l) => /worker exited with code 1; replacing it/.test(String(l.msg)));
  await eventually(async () => (exits().some((l) => Number(l.respawnInMs) >= 500) ? true : undefined), 15_000, 50, 'a back-off of 500 ms or more');
  t.ok(exits().length >= 4, `workers kept exiting (${exits().length} exits)`);
  t.ok(gateway.lines.some((l) => l.level === 60 && /could not start serving/.test(String(l.msg))), 'the workers say why they exit');
  t.equal(gateway.child.exitCode, null, 'the primary is still running');
  const delays = exits().map((l) => Number(l.respawnInMs));
  t.ok(delays.every((d) => d <= 30_000), 'back-off is bounded');

  await new Promise<void>((resolve) => blocker.close(() => resolve()));
  await gateway.waitForLog((l) => l.msg === 'gateway operational', 15_000, "'gateway operational' once the port is free");
  const served = await eventually(
    async () => {
      const res = await httpRequest(port, '/ok');
      return res.status === 200 ? res : undefined;
    },
    5000,
    50,
    'a routed request answered',
  );
  t.equal(JSON.parse(served.body).upstream, 'backend');
  t.equal((await httpRequest(port, '/healthcheck')).status, 200);

  gateway.signal('SIGTERM');
  t.same(await gateway.exited, { code: 0, signal: null }, 'and it still stops cleanly');
});
