// docs/reference/processes.md#reload-sighup: a reload never waits on an upstream whose entry it does
// not change. A failed upstream whose doc endpoint now hangs (the reload used to fetch it again and
// apply only after fetchTimeoutMs), and a pending one whose first discovery hangs (the reload used to
// start another), hold back no weight change; the unchanged upstream keeps its state and the reload
// status does not count it. SIGHUPs that keep coming while a reload waits on a new upstream that hangs
// no longer restart it each time: it applies, and one more reload follows.
import http from 'node:http';
import net from 'node:net';
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, swaggerDoc, testConfig, type GatewayProcess, type Teardown } from '../helpers/gateway-process.js';

interface Health {
  reload?: { ok: boolean; applied: boolean; error?: string };
  upstreams: Array<{ serviceLocation: string; state: string; weight: number; lastError?: string }>;
}

/** A doc endpoint that refuses its first connection (reset) and then hangs every one after it. */
async function failsThenHangs(t: Teardown): Promise<string> {
  const sockets = new Set<net.Socket>();
  let first = true;
  const server = net.createServer((socket) => {
    if (first) {
      first = false;
      socket.destroy();
      return;
    }
    sockets.add(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });
  return `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

async function health(gateway: GatewayProcess): Promise<Health> {
  return JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body) as Health;
}

/** The health report once it carries a reload status (the workers get it just after the log line). */
function withReload(gateway: GatewayProcess): Promise<Health> {
  return eventually(async () => {
    const h = await health(gateway);
    return h.reload ? h : undefined;
  }, 5000, 50, 'the reload status in the health report');
}

const DISCOVERY = { fetchTimeoutMs: 30_000, retries: 0, backoffMs: 100, refreshIntervalMs: 0 };

t.test('a failed upstream whose doc now hangs does not hold back a reload that changes another weight', async (t) => {
  const good = await startUpstream(t, { name: 'good', spec: swaggerDoc('good', { '/good': ['GET'] }) });
  const flaky = await failsThenHangs(t);
  const config = (weight: number) =>
    testConfig(
      [
        { serviceType: 'swagger2', serviceLocation: good.location, weight },
        { serviceType: 'swagger2', serviceLocation: flaky },
      ],
      { discovery: DISCOVERY },
    );
  const gateway = await startGateway(t, { config: config(1) });
  await gateway.waitForLog((l) => l.msg === 'upstream discovery failed' && l.upstream === flaky, 15_000, 'the flaky upstream failed');
  await gateway.waitForLog((l) => l.msg === 'upstream discovered' && l.upstream === good.location, 15_000, 'the good upstream');

  gateway.writeConfig(config(9));
  const started = Date.now();
  gateway.signal('SIGHUP');
  const fetching = await gateway.waitForLog((l) => l.msg === 'config reload: discovering new and changed upstreams', 10_000, 'the reload');
  t.equal(fetching.fetching, 0, 'nothing to fetch: a weight change alone');
  // Before, the reload fetched the failed upstream again and waited out its 30 s fetchTimeoutMs.
  await gateway.waitForLog((l) => l.msg === 'config reloaded', 10_000, 'the reload applied without waiting on the flaky upstream');
  t.ok(Date.now() - started < 10_000);
  const after = await withReload(gateway);
  t.same(
    after.upstreams.map((u) => [u.serviceLocation, u.state, u.weight]),
    [
      [good.location, 'ready', 9],
      [flaky, 'failed', 1],
    ],
    'the new weight serves; the unchanged upstream keeps its state',
  );
  t.ok(after.upstreams[1]!.lastError, 'and its lastError');
  t.match(after.reload, { ok: true, applied: true }, 'an unchanged upstream that failed before is not this reload\'s failure');
  t.equal((await httpRequest(gateway.port, '/good')).status, 200);
});

t.test('a pending upstream whose first discovery hangs does not hold back a reload, and is not fetched again', async (t) => {
  const good = await startUpstream(t, { name: 'good', spec: swaggerDoc('good', { '/good': ['GET'] }) });
  let release: () => void = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  const slow = await startUpstream(t, { name: 'slow', spec: swaggerDoc('slow', { '/slow': ['GET'] }), holdSpec: held });
  t.teardown(() => release());
  const config = (weight: number) =>
    testConfig(
      [
        { serviceType: 'swagger2', serviceLocation: good.location, weight },
        { serviceType: 'swagger2', serviceLocation: slow.location },
      ],
      { discovery: DISCOVERY },
    );
  const gateway = await startGateway(t, { config: config(1) });
  await gateway.waitForLog((l) => l.msg === 'upstream discovered' && l.upstream === good.location, 15_000, 'the good upstream');

  gateway.writeConfig(config(9));
  gateway.signal('SIGHUP');
  await gateway.waitForLog((l) => l.msg === 'config reloaded', 10_000, 'the reload applied while the slow doc still hangs');
  const during = await health(gateway);
  t.same(
    during.upstreams.map((u) => [u.state, u.weight]),
    [
      ['ready', 9],
      ['pending', 1],
    ],
  );
  release();
  // Its first discovery, still running, settles it in the config that now serves.
  await eventually(async () => ((await httpRequest(gateway.port, '/slow')).status === 200 ? true : undefined), 10_000, 50, '/slow routed');
  // The health report follows the table in its own message from the primary: a moment later under load.
  t.ok(await eventually(async () => ((await httpRequest(gateway.port, '/healthcheck')).status === 200 ? true : undefined), 5000, 50, '/healthcheck 200'));
});

t.test('SIGHUPs every 700 ms while a reload waits on a new upstream that hangs: the reload applies, then one more', async (t) => {
  const good = await startUpstream(t, { name: 'good', spec: swaggerDoc('good', { '/good': ['GET'] }) });
  const hanging = await failsThenHangs(t);
  const config = (weight: number, withHanging: boolean) =>
    testConfig(
      [
        { serviceType: 'swagger2', serviceLocation: good.location, weight },
        ...(withHanging ? [{ serviceType: 'swagger2', serviceLocation: hanging, specPath: '/never' }] : []),
      ],
      { discovery: { ...DISCOVERY, fetchTimeoutMs: 2500 } },
    );
  const gateway = await startGateway(t, { config: config(1, false), waitFor: (l) => l.msg === 'gateway operational' });
  // Use up the flaky server's refused first connection: every later fetch hangs.
  await new Promise<void>((resolve) => net.connect(Number(new URL(hanging).port), '127.0.0.1').on('close', () => resolve()).on('error', () => resolve()));

  let weight = 2;
  gateway.writeConfig(config(weight, true));
  gateway.signal('SIGHUP');
  const sighups = setInterval(() => {
    weight++;
    gateway.writeConfig(config(weight, true));
    gateway.signal('SIGHUP');
  }, 700);
  t.teardown(() => clearInterval(sighups));
  // Before, each SIGHUP aborted the reload waiting on the hanging doc and started one more: none applied.
  const applied = await gateway.waitForLog((l) => l.msg === 'config reloaded', 8000, 'a reload applied while SIGHUPs keep coming');
  t.equal(applied.ok, false, 'the new upstream that hangs is this reload\'s failure');
  const problems = await gateway.waitForLog((l) => /^config reloaded with problems/.test(String(l.msg)), 5000, 'the problem line');
  t.match(problems.msg, `upstream ${hanging} could not be discovered`);
  clearInterval(sighups);
  const last = weight;
  // The SIGHUPs that came meanwhile collapse into reloads that no longer wait (the hanging upstream is now unchanged).
  const settled = await eventually(
    async () => {
      const h = await health(gateway);
      return h.upstreams[0]!.weight === last ? h : undefined;
    },
    8000,
    50,
    `the last weight (${last}) serves`,
  );
  t.equal(settled.upstreams[1]!.state, 'failed');
});

t.test('re-discovery off: an applied reload fetches an unchanged failed upstream again, in the background', async (t) => {
  const good = await startUpstream(t, { name: 'good', spec: swaggerDoc('good', { '/good': ['GET'] }) });
  let answers = 0;
  const late = http.createServer((req, res) => {
    // Its first doc request fails (the upstream is failed at start); it answers from then on.
    if (answers++ === 0) return void res.writeHead(503).end();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(swaggerDoc('late', { '/late': ['GET'] })));
  });
  await new Promise<void>((resolve) => late.listen(0, '127.0.0.1', resolve));
  t.teardown(() => late.close());
  const lateLocation = `http://127.0.0.1:${(late.address() as net.AddressInfo).port}`;
  const config = (weight: number) =>
    testConfig(
      [
        { serviceType: 'swagger2', serviceLocation: good.location, weight },
        { serviceType: 'swagger2', serviceLocation: lateLocation, specPath: '/spec' },
      ],
      { discovery: DISCOVERY },
    );
  const gateway = await startGateway(t, { config: config(1) });
  await gateway.waitForLog((l) => l.msg === 'upstream discovery failed' && l.upstream === lateLocation, 15_000, 'the late upstream failed');
  gateway.writeConfig(config(2));
  gateway.signal('SIGHUP');
  await gateway.waitForLog((l) => l.msg === 'config reloaded', 10_000, 'the reload');
  await eventually(async () => ((await httpRequest(gateway.port, '/late')).status === 200 ? true : undefined), 10_000, 50, '/late routed');
  t.equal((await health(gateway)).upstreams[1]!.state, 'ready');
});
