// The instance's cache directory removed under the running gateway (2 workers), as a temporary-files
// cleaner does: the workers must not end up with stores of their own. A worker started afterwards (one
// killed with SIGKILL and replaced) finds the directory gone and says so, the primary makes a new one
// and every worker moves its cache there: a PUT on one worker drops the entry for the other again. The
// primary also finds, within 5 s, a directory or a file of it removed while no worker opens it.
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { eventually, type LogLine } from '../helpers/gateway-process.js';
import { startCacheUpstream, startCachingGateway } from '../helpers/cache-gateway.js';
import { rawRequest } from '../helpers/raw-http.js';

const app = await startCacheUpstream(t, (path, res) => {
  res.writeHead(200, { 'content-type': 'text/plain', 'cache-control': 'max-age=600' });
  res.end(`${path} #${app.seen.get(`GET ${path}`)}`);
});
const gateway = await startCachingGateway(t, app.location, ['GET /items/{id}', 'PUT /items/{id}']);

interface Answer {
  worker: string;
  status: number;
  xCache: string | undefined;
  body: string;
}

/** One fresh connection: the health check names the worker, then the request on that connection. */
async function ask(method: string, path: string): Promise<Answer> {
  const head = (m: string, p: string, more = '') => `${m} ${p} HTTP/1.1\r\nHost: gw\r\n${more}\r\n`;
  const payload = head('GET', '/healthcheck') + (method === 'PUT' ? head(method, path, 'Content-Length: 2\r\n') + '{}' : head(method, path));
  const result = await rawRequest(gateway.port, payload, { responses: 2, waitMs: 10_000 });
  const [health, answer] = result.responses;
  if (!health?.complete || !answer?.complete) throw new Error(`${method} ${path}: no complete answer`);
  return { worker: health.headers['x-gateway-worker']![0]!, status: answer.status, xCache: answer.headers['x-cache']?.[0], body: answer.body.toString() };
}

/** The first answer of each of the two workers to GET `path`. */
async function eachWorker(path: string): Promise<Map<string, Answer>> {
  const seen = new Map<string, Answer>();
  for (let i = 0; i < 80 && seen.size < 2; i++) {
    const answer = await ask('GET', path);
    if (!seen.has(answer.worker)) seen.set(answer.worker, answer);
  }
  if (seen.size < 2) throw new Error('both workers never answered');
  return seen;
}

function cacheDirs(): string[] {
  const pid = gateway.child.pid;
  return readdirSync(tmpdir())
    .filter((name) => name.startsWith(`specgate-cache-${pid}-`))
    .map((name) => join(tmpdir(), name));
}

/** Stored by one worker, a HIT on the other; a PUT on one worker makes both miss once. */
async function oneStoreForBoth(t: Test, path: string): Promise<void> {
  const first = await ask('GET', path);
  t.equal(first.xCache, 'MISS');
  for (const [worker, answer] of await eachWorker(path)) t.equal(answer.xCache, 'HIT', `${path}: a HIT on worker ${worker}`);
  t.equal(app.seen.get(`GET ${path}`), 1, `${path}: one upstream request for the instance`);
  const put = await ask('PUT', path);
  t.equal(put.status, 204);
  for (const [worker, answer] of await eachWorker(path)) {
    t.equal(answer.body, `${path} #2`, `${path}: worker ${worker} serves the answer fetched after the PUT`);
  }
  t.equal(app.seen.get(`GET ${path}`), 2, `${path}: fetched once more for the instance, not once per worker`);
}

function workerPids(): Set<string> {
  return new Set(gateway.lines.filter((l) => l.role === 'worker' && typeof l.pid === 'number').map((l) => String(l.pid)));
}

const moved = (after: number) => (line: LogLine) => line.role !== 'worker' && typeof line.msg === 'string' && line.msg.includes('every worker moves its cache') && gateway.lines.indexOf(line) >= after;

/** Waits until what one worker stores is a HIT on the other (each worker may take a moment to move). */
async function sharedAgain(label: string): Promise<void> {
  let last = '';
  try {
    await eventually(
      async () => {
        const path = `/items/probe-${label}-${Math.random()}`;
        const first = await ask('GET', path);
        for (let i = 0; i < 20; i++) {
          const other = await ask('GET', path);
          if (other.worker !== first.worker) {
            last = `worker ${first.worker} then ${other.worker}: ${other.xCache}`;
            return other.xCache === 'HIT' ? true : undefined;
          }
        }
        return undefined;
      },
      15_000,
      100,
      `both workers on one store again (${label})`,
    );
  } catch (err) {
    // The gateway's last warnings and errors (the move included) tell which worker did not move, and why.
    const said = gateway.lines.filter((line) => Number(line.level) >= 40).slice(-8);
    throw new Error(`${(err as Error).message}; last probe: ${last}; the gateway's last warnings: ${JSON.stringify(said)}`, { cause: err });
  }
}

t.test('removed, then a worker killed and replaced: one store for both workers again, said in the log', async (t) => {
  await oneStoreForBoth(t, '/items/before');
  const [dir] = cacheDirs();
  t.ok(dir !== undefined && existsSync(join(dir, 'data.mdb')) && existsSync(join(dir, 'lock.mdb')), 'the directory holds the environment');
  const mark = gateway.lines.length;
  rmSync(dir!, { recursive: true, force: true });
  const victim = (await ask('GET', '/items/before')).worker;
  process.kill(Number(victim), 'SIGKILL');
  await eventually(
    async () => {
      const answers = await Promise.all(Array.from({ length: 6 }, () => ask('GET', '/healthcheck').catch(() => undefined)));
      const workers = new Set(answers.filter((a) => a !== undefined).map((a) => a!.worker));
      return workers.size === 2 && !workers.has(victim) ? true : undefined;
    },
    30_000,
    200,
    'the replacement serving beside the other worker',
  );
  t.ok(workerPids().size >= 3, 'a worker was replaced');
  await sharedAgain('kill');
  await oneStoreForBoth(t, '/items/after-kill');

  const move = await gateway.waitForLog(moved(mark), 1000, "the primary's warning");
  // The replacement worker says the directory is gone when it opens it before the primary's own check
  // (every 5 s) finds it; on a loaded host that check can come first, and then no worker needs to say so.
  const gone = gateway.lines.find((l) => l.role === 'worker' && typeof l.msg === 'string' && l.msg.includes('is gone; the primary is asked for a new one'));
  if (gone !== undefined) t.equal(gone.dir, dir, 'the replacement worker said the directory was gone');
  t.equal(move.was, dir);
  t.not(move.dir, dir);
  t.equal(move.level, 40, 'the primary warned that the workers move');
  t.same(cacheDirs(), [move.dir], 'one directory for the instance: the new one');
});

t.test('removed while no worker opens it: the primary finds it within 5 s; so for LMDB\'s lock file alone', async (t) => {
  for (const part of ['', 'lock.mdb']) {
    const what = part || 'the directory';
    const [dir] = cacheDirs();
    const mark = gateway.lines.length;
    rmSync(join(dir!, part), { recursive: true, force: true });
    const move = await gateway.waitForLog(moved(mark), 10_000, `the primary's warning (${what} removed)`);
    t.equal(move.was, dir, `${what} removed: the workers move`);
    await sharedAgain(part || 'dir');
    t.same(cacheDirs(), [move.dir]);
    await oneStoreForBoth(t, `/items/after-${part || 'dir'}`);
  }
});
