// SIGTERM with a slow request in flight: it completes, new connections are refused, exit code 0.
import { connect } from 'node:net';
import t from 'tap';
import { httpRequest, startGateway, startUpstream, testConfig } from './helpers/gateway-process.js';

let slowArrived: () => void = () => {};
const arrived = new Promise<void>((resolve) => (slowArrived = resolve));
const upstream = await startUpstream(t, {
  name: 'slow',
  handle: (req, res) => {
    slowArrived();
    setTimeout(() => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ upstream: 'slow', done: true }));
    }, 1500);
  },
});
const gateway = await startGateway(t, {
  config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/slow' }] }]),
  waitFor: (line) => line.msg === 'gateway operational',
});

function tryConnect(port: number): Promise<'connected' | string> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.destroy();
      resolve('connected');
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

t.test('in-flight request finishes, new connections are refused, exit 0', async (t) => {
  const inFlight = httpRequest(gateway.port, '/slow', { timeoutMs: 10_000 });
  await arrived;
  const signalledAt = Date.now();
  gateway.signal('SIGTERM');
  await gateway.waitForLog((l) => l.msg?.startsWith('worker stopping') === true && gateway.lines.filter((x) => x.msg?.startsWith('worker stopping')).length >= 2, 5000, 'both workers stopping');
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.equal(await tryConnect(gateway.port), 'ECONNREFUSED', 'new connections are refused while draining');

  const res = await inFlight;
  t.equal(res.status, 200, 'the slow request completed');
  t.same(JSON.parse(res.body), { upstream: 'slow', done: true });
  t.ok(Date.now() - signalledAt >= 1000, 'it was still in flight when the signal came');

  const exit = await gateway.exited;
  t.same(exit, { code: 0, signal: null }, 'the primary exits 0');
  t.ok(gateway.lines.some((l) => l.msg === 'gateway stopped'));
});
