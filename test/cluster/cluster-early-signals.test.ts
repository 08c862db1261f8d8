// docs/reference/processes.md#signals: a signal that reaches the primary while it is still starting
// (before it forks any worker: here, while it waits for the example upstreams of --with-examples,
// held stopped) does what it does to a running gateway. SIGHUP is a reload once the gateway runs;
// SIGTERM stops it, exit 0, without starting any worker.
import { childrenOf } from '../helpers/proc.js';
import t, { type Test } from 'tap';
import { eventually, startGateway, startUpstream, testConfig, type GatewayProcess } from '../helpers/gateway-process.js';
import { holdExamplePorts } from '../helpers/machine-lock.js';

// --with-examples runs the example upstreams on their fixed ports.
await holdExamplePorts(t);
const upstream = await startUpstream(t, { name: 'backend' });
const config = testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }]);


/** A gateway whose primary waits, stopped, for its example upstreams: it has not started any worker yet. */
async function startingGateway(t: Test): Promise<{ gateway: GatewayProcess; examples: number }> {
  const gateway = await startGateway(t, { config, workers: 1, args: ['--with-examples'], waitForListening: false });
  const examples = await eventually(async () => childrenOf(gateway.child.pid!)[0], 20_000, 5, 'the example upstreams forked');
  process.kill(examples, 'SIGSTOP');
  t.notOk(gateway.lines.some((l) => l.msg === 'example upstreams started' || l.msg === 'gateway starting'), 'the primary is still starting');
  return { gateway, examples };
}

/** Long enough for Node's default action (the process ends) to be seen. */
const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 500));

t.test('SIGHUP while the primary starts: a reload once it runs', async (t) => {
  const { gateway, examples } = await startingGateway(t);
  gateway.signal('SIGHUP');
  await settle();
  t.equal(gateway.child.exitCode ?? gateway.child.signalCode, null, 'the primary is alive');
  process.kill(examples, 'SIGCONT');
  await gateway.waitForLog((l) => l.msg === 'SIGHUP while the gateway was starting: the config is loaded again', 30_000);
  await gateway.waitForLog((l) => l.msg === 'config reloaded', 60_000, "'config reloaded'");
  await gateway.waitForLog((l) => l.msg === 'gateway operational', 60_000);
  gateway.signal('SIGTERM');
  t.same(await gateway.exited, { code: 0, signal: null }, 'a SIGTERM then stops it, exit 0');
});

t.test('SIGTERM while the primary starts: exit 0, no worker started', async (t) => {
  const { gateway, examples } = await startingGateway(t);
  gateway.signal('SIGTERM');
  await settle();
  t.equal(gateway.child.exitCode ?? gateway.child.signalCode, null, 'the primary waits for what it is doing');
  process.kill(examples, 'SIGCONT');
  t.same(await gateway.exited, { code: 0, signal: null }, 'exit 0');
  t.ok(gateway.lines.some((l) => l.msg === 'SIGTERM while the gateway was starting: it stops before starting any worker'), 'it says why');
  t.notOk(gateway.lines.some((l) => l.msg === 'worker started'), 'no worker started');
});
