// The response cache with virtual hosts, through the running gateway with its default 2 workers
// behind a trusted proxy (127.0.0.1), and one upstream per host. Routing goes by the client's Host,
// the origin part of a key by the X-Forwarded-Host the upstream is told, and a trusted proxy may send
// two that differ (nginx's usual `proxy_set_header Host $host` passes a client's X-Forwarded-Host
// through). An entry must only be served to requests routed among the same upstreams, and an unsafe
// request must only drop entries of the upstreams it was routed among.
import t, { type Test } from 'tap';
import { startGateway, startUpstream, testConfig, type TestUpstream } from '../helpers/gateway-process.js';
import { askNamingWorker, eachWorkerAnswer, type WorkerAnswer } from '../helpers/cache-gateway.js';

/** Answers a GET with its name and the X-Forwarded-Host it got, storable for 10 minutes; anything else 204. */
function hostUpstream(name: string): Promise<TestUpstream> {
  return startUpstream(t, {
    name,
    handle: (req, res) => {
      if (req.method !== 'GET') {
        res.writeHead(204);
        res.end();
        return;
      }
      res.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'max-age=600' });
      res.end(`${name} for ${String(req.headers['x-forwarded-host'])}`);
    },
  });
}

const a = await hostUpstream('a');
const b = await hostUpstream('b');
const endpoints = [
  { method: 'GET', path: '/items/{id}' },
  { method: 'POST', path: '/items/{id}' },
];
const gateway = await startGateway(t, {
  config: testConfig(
    [
      { serviceType: 'static', serviceLocation: a.location, hosts: ['a.test'], endpoints },
      { serviceType: 'static', serviceLocation: b.location, hosts: ['b.test'], endpoints },
    ],
    { accessLog: { enabled: false }, trustedProxies: ['127.0.0.1'], middleware: [{ id: 'cache', type: 'responseCache' }] },
  ),
  waitFor: (line) => line.msg === 'gateway operational',
  startTimeoutMs: 60_000,
});

/** One fresh connection naming its worker, with Host `host` and X-Forwarded-Host `forwarded` if given. */
function ask(method: string, target: string, host: string, forwarded?: string): Promise<WorkerAnswer> {
  return askNamingWorker(gateway.port, method, target, `Host: ${host}\r\n${forwarded === undefined ? '' : `X-Forwarded-Host: ${forwarded}\r\n`}`);
}

/** The first answer of each worker to GET `target`. */
async function eachWorker(target: string, host: string, forwarded?: string): Promise<WorkerAnswer[]> {
  return [...(await eachWorkerAnswer(gateway.port, target, `Host: ${host}\r\n${forwarded === undefined ? '' : `X-Forwarded-Host: ${forwarded}\r\n`}`)).values()];
}

/** GET on both workers: each answer's X-Cache and body. */
async function onBoth(t: Test, target: string, host: string, forwarded: string | undefined, xCache: string, body: string): Promise<void> {
  for (const answer of await eachWorker(target, host, forwarded)) {
    t.same([answer.status, answer.xCache, answer.body], [200, xCache, body], `Host ${host}${forwarded === undefined ? '' : `, X-Forwarded-Host ${forwarded}`}: worker ${answer.worker}`);
  }
}

t.test("an answer of a.test's upstream stored under X-Forwarded-Host b.test is not served to b.test's clients", async (t) => {
  const first = await ask('GET', '/items/1', 'a.test', 'b.test');
  t.same([first.status, first.xCache, first.body], [200, 'MISS', 'a for b.test'], 'routed by Host to a.test\'s upstream, which is told b.test');
  const own = await ask('GET', '/items/1', 'b.test', 'b.test');
  t.same([own.xCache, own.body], ['MISS', 'b for b.test'], "b.test's request goes to b.test's upstream");
  await onBoth(t, '/items/1', 'b.test', 'b.test', 'HIT', 'b for b.test');
  await onBoth(t, '/items/1', 'b.test', undefined, 'HIT', 'b for b.test');
  await onBoth(t, '/items/1', 'a.test', 'b.test', 'HIT', 'a for b.test');
  t.same([a.seen.get('GET /items/1'), b.seen.get('GET /items/1')], [1, 1], 'each upstream asked once for the instance');
});

t.test('an unsafe request drops the entries of the host set it was routed by, not those of another', async (t) => {
  await ask('GET', '/items/2', 'b.test');
  await onBoth(t, '/items/2', 'b.test', undefined, 'HIT', 'b for b.test');

  const post = await ask('POST', '/items/2', 'a.test', 'b.test');
  t.equal(post.status, 204, "routed to a.test's upstream");
  await onBoth(t, '/items/2', 'b.test', undefined, 'HIT', 'b for b.test');
  t.equal(b.seen.get('GET /items/2'), 1, "b.test's entry was not dropped");

  // The entries of a.test's upstreams under that origin are its own.
  await ask('GET', '/items/2', 'a.test', 'b.test');
  await onBoth(t, '/items/2', 'a.test', 'b.test', 'HIT', 'a for b.test');
  t.equal((await ask('POST', '/items/2', 'a.test', 'b.test')).status, 204);
  const refetched = await ask('GET', '/items/2', 'a.test', 'b.test');
  t.same([refetched.xCache, refetched.body], ['MISS', 'a for b.test'], "the entry of a.test's upstreams is dropped");

  t.equal((await ask('POST', '/items/2', 'b.test')).status, 204);
  const again = await ask('GET', '/items/2', 'b.test');
  t.same([again.xCache, again.body], ['MISS', 'b for b.test'], "and a b.test request drops b.test's");
});
