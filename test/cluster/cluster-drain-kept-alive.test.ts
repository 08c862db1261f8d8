// docs/reference/processes.md#shutdown: a draining worker answers every request with Connection: close,
// and closes a kept-alive connection between two requests only once nothing has been in flight, and no
// request has arrived, for a short quiet time. A client that sends its next request on another
// connection of its pool as soon as an answer reaches it gets that request answered, not reset.
import t from 'tap';
import { eventually, openWorkerConnection, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

const releases: Array<() => void> = [];
const upstream = await startUpstream(t, {
  name: 'backend',
  handle: (req, res) => {
    const answer = (): void => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ path: req.url }));
    };
    if (req.url?.startsWith('/slow/')) releases.push(answer);
    else answer();
  },
});
const gateway = await startGateway(t, {
  config: testConfig([
    { serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/slow/{id}' }, { method: 'GET', path: '/items/{id}' }] },
  ]),
  workers: 1,
  waitFor: (line) => line.msg === 'gateway operational',
});

t.test("a request sent on a kept-alive connection right after the drain's last answer is answered", async (t) => {
  const busy = await openWorkerConnection(t, gateway.port);
  const idle = await openWorkerConnection(t, gateway.port);
  t.equal(idle.workerPid, busy.workerPid, 'one worker holds both connections');
  const worker = Number(busy.workerPid);
  const slow = busy.get('/slow/1');
  await eventually(async () => (releases.length > 0 ? true : undefined), 10_000, 10, 'the slow request at the upstream');
  process.kill(worker, 'SIGTERM');
  await gateway.waitForLog((line) => line.pid === worker && line.msg === 'worker stopping: no new connections, finishing in-flight requests');

  releases.shift()!();
  const last = await slow;
  t.equal(last.status, 200, 'the request in flight is answered');
  t.equal(last.headers.connection?.[0], 'close', 'with Connection: close');
  // What a pooled client does next: the next request goes out on another kept-alive connection.
  const next = await idle.get('/items/2').catch((err: Error) => err);
  t.notOk(next instanceof Error, `the request on the idle connection is answered (${next instanceof Error ? next.message : next.status})`);
  if (!(next instanceof Error)) {
    t.equal(next.status, 200);
    t.equal(next.headers.connection?.[0], 'close', 'with Connection: close');
  }
  await gateway.waitForLog((line) => line.pid === worker && line.msg === 'worker stopped');
});
