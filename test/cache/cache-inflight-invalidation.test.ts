// An invalidation that comes while a GET is on its way to the upstream (RFC 9111 4.4), through the
// running gateway (2 workers) and the `local` store: the GET's answer may have been made before the PUT
// changed the resource, so it is served to its client but not stored, on whichever worker the PUT ran.
// The next GET goes upstream and gets the new state.
import t, { type Test } from 'tap';
import { Client } from 'undici';
import { startUpstream } from '../helpers/gateway-process.js';
import { startCachingGateway } from '../helpers/cache-gateway.js';

/** The state of each path: a PUT moves it on. */
const versions = new Map<string, number>();
const app = await startUpstream(t, {
  name: 'app',
  handle: (req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    if (req.method === 'PUT') {
      versions.set(path, (versions.get(path) ?? 1) + 1);
      res.writeHead(204);
      res.end();
      return;
    }
    // The answer is made when the request arrives and sent 800 ms later (a slow upstream).
    const body = `${path} v${versions.get(path) ?? 1}`;
    setTimeout(() => {
      res.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'max-age=600' });
      res.end(body);
    }, 800);
  },
});
const gateway = await startCachingGateway(t, app.location, ['GET /items/{id}', 'PUT /items/{id}']);

interface Answer {
  status: number;
  xCache: string | undefined;
  body: string;
}

/** A keep-alive connection whose worker is known. */
interface Connection {
  worker: string;
  send(method: string, path: string): Promise<Answer>;
}

async function connect(t: Test): Promise<Connection> {
  const client = new Client(`http://127.0.0.1:${gateway.port}`, { pipelining: 1 });
  t.teardown(() => client.close());
  const send = async (method: string, path: string): Promise<Answer> => {
    const answer = await client.request({ method, path, headers: { host: 'gw' }, body: method === 'PUT' ? '{}' : undefined });
    const xCache = answer.headers['x-cache'];
    return { status: answer.statusCode, xCache: Array.isArray(xCache) ? xCache.join(',') : xCache, body: await answer.body.text() };
  };
  const health = await client.request({ method: 'GET', path: '/healthcheck', headers: { host: 'gw' } });
  await health.body.dump();
  return { worker: String(health.headers['x-gateway-worker']), send };
}

/** Two connections to each worker: [worker A, worker A, worker B, worker B]. */
async function connections(t: Test): Promise<[Connection, Connection, Connection, Connection]> {
  const byWorker = new Map<string, Connection[]>();
  for (let i = 0; i < 60; i++) {
    const connection = await connect(t);
    const list = byWorker.get(connection.worker) ?? [];
    list.push(connection);
    byWorker.set(connection.worker, list);
    const full = [...byWorker.values()].filter((l) => l.length >= 2);
    if (full.length === 2) return [full[0]![0]!, full[0]![1]!, full[1]![0]!, full[1]![1]!];
  }
  throw new Error('two connections to each worker never came');
}

const delay = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

t.test('a PUT on the other worker while a GET leads: its answer is not stored; a waiting GET goes upstream itself', async (t) => {
  const [a1, a2, b1, b2] = await connections(t);
  t.not(a1.worker, b1.worker);
  const path = '/items/race-across';
  const leader = a1.send('GET', path);
  await delay(100);
  // A follower on the other worker waits for the leader's entry.
  const follower = b1.send('GET', path);
  await delay(150);
  t.equal((await b2.send('PUT', path)).status, 204, 'the PUT succeeded on the other worker while the GET was upstream');
  const led = await leader;
  t.same([led.xCache, led.body], ['MISS', `${path} v1`], 'the leader gets the answer made before the PUT');
  const followed = await follower;
  t.equal(followed.body, `${path} v2`, 'the follower, released without an entry, went upstream itself and got the new state');
  const next = await a2.send('GET', path);
  t.equal(next.body, `${path} v2`, 'the next GET on the leader\'s worker gets the new state, not the stored old one');
  t.equal((await b1.send('GET', path)).xCache, 'HIT', 'the new state is stored for both workers');
  t.equal((await a1.send('GET', path)).body, `${path} v2`);
});

t.test('a PUT on the same worker while a GET is upstream: the same', async (t) => {
  const [a1, a2] = await connections(t);
  const path = '/items/race-same';
  const leader = a1.send('GET', path);
  await delay(250);
  t.equal((await a2.send('PUT', path)).status, 204);
  t.equal((await leader).body, `${path} v1`);
  const next = await a2.send('GET', path);
  t.same([next.xCache, next.body], ['MISS', `${path} v2`], 'not a HIT of the answer made before the PUT');
  t.same(await a1.send('GET', path), { status: 200, xCache: 'HIT', body: `${path} v2` });
});

t.test('a GET that goes upstream after the PUT is stored as usual', async (t) => {
  const [a1, , b1] = await connections(t);
  const path = '/items/after';
  t.equal((await b1.send('PUT', path)).status, 204);
  t.same(await a1.send('GET', path), { status: 200, xCache: 'MISS', body: `${path} v2` });
  t.same(await b1.send('GET', path), { status: 200, xCache: 'HIT', body: `${path} v2` });
});
