// `port: 0` becomes a concrete port the primary holds until a worker listens (src/cluster/port-hold.ts):
// meanwhile nothing else can listen on it, the workers (SO_REUSEPORT) can join it, and once released
// the primary holds nothing there.
import t from 'tap';
import { loadUws } from '../../src/native/uws.js';
import type { UwsListenSocket } from '../../src/native/uws-types.js';
import { holdFreePort } from '../../src/cluster/port-hold.js';
import { portHolders } from '../../src/cluster/port-holder.js';
import { probePort } from '../../src/cluster/port-probe.js';
import { httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

/** Whether a plain listener (no SO_REUSEPORT, as any other program's) can take `port`: the primary's own probe. */
async function plainListenerCan(port: number): Promise<boolean> {
  return (await probePort('127.0.0.1', port)) === null;
}

t.test('a held port: taken for others, joinable by a SO_REUSEPORT listener, free once both let go', async (t) => {
  const held = await holdFreePort('127.0.0.1');
  t.ok(held.port > 0, 'a concrete port');
  t.notOk(await plainListenerCan(held.port), 'another program cannot listen there while it is held');
  const { uws } = loadUws();
  const app = uws.App();
  let joined: UwsListenSocket | false = false;
  app.listen('127.0.0.1', held.port, (socket) => {
    joined = socket;
  });
  t.not(joined, false, 'a worker-like uWS listener joins it');
  held.release();
  held.release();
  t.notOk(await plainListenerCan(held.port), 'still taken: the worker-like listener has it');
  uws.us_listen_socket_close(joined as unknown as UwsListenSocket);
  app.close?.();
  t.ok(await plainListenerCan(held.port), 'free once both let go');
});

t.test('a gateway on port 0: once it listens, only its workers hold the port', async (t) => {
  const upstream = await startUpstream(t, { name: 'items' });
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }]),
    workers: 2,
    waitFor: (line) => line.msg === 'gateway operational',
  });
  t.equal((await httpRequest(gateway.port, '/items/1')).status, 200);
  const holders = portHolders(gateway.port);
  t.ok(holders.length > 0, 'the holders are visible in /proc');
  t.notOk(holders.some((holder) => holder.pid === gateway.child.pid), 'the primary holds nothing on the port');
  t.ok(holders.every((holder) => holder.gatewayPid === gateway.child.pid), 'every holder is a worker of this gateway');
});
