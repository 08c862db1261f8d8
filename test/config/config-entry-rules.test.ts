// Rules a middleware or listener enforces when a worker builds it are checked when the config is loaded,
// by the same code: `gateway check` and `gateway start` refuse such a config naming the file, the field
// and why (start used to crash-loop its workers for ever), and a mismatchLog in a missing directory is
// refused as accessLog.destination is.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { MIDDLEWARE_TYPES } from '../../src/middleware/registry.js';
import { gateway } from '../helpers/cli.js';
import { httpRequest, startGateway, testConfig } from '../helpers/gateway-process.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-entry-rules-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, config: Record<string, unknown>): string {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify({ port: 0, workers: 1, ...config }));
  return path;
}

const CACHE = '/middleware/0/maxEntryBytes: 100 is larger than maxBytes (10); no entry that large could be kept in the local store';

t.test('a cache entry larger than the cache: check and start refuse it', async (t) => {
  const path = file('cache.json', { middleware: [{ id: 'cache', type: 'responseCache', maxBytes: 10, maxEntryBytes: 100 }] });
  const check = await gateway('check', '--config', path);
  t.equal(check.code, 1);
  t.equal(check.stderr, `error: ${path}: ${CACHE}\ngateway check: ${path} has 1 problem(s)\n`);
  const start = await gateway('start', '--config', path);
  t.equal(start.code, 1, 'start exits at once instead of respawning crashing workers');
  t.match(start.stderr, `${path}: ${CACHE}`);
  t.notMatch(start.stdout + start.stderr, /worker started/);
});

t.test('a rate limit whose arithmetic would not be exact', async (t) => {
  const path = file('rate.json', { middleware: [{ id: 'rl', type: 'rateLimit', limit: 10_000_000, windowMs: 2_678_400_000 }] });
  const check = await gateway('check', '--config', path);
  t.equal(check.code, 1);
  t.match(check.stderr, `error: ${path}: /middleware/0/limit: limit × windowMs must be below 2^53, got 10000000 × 2678400000 (= 26784000000000000): the arithmetic would no longer be exact; lower the limit or the window\n`);
});

t.test('a mismatchLog in a directory that does not exist', async (t) => {
  const missing = join(dir, 'no-such-dir', 'mismatches.jsonl');
  const path = file('shadow.json', { listeners: [{ id: 'shadow', type: 'alternateUpstream', serviceLocation: 'http://127.0.0.1:9', mismatchLog: missing }] });
  const check = await gateway('check', '--config', path);
  t.equal(check.code, 1);
  t.equal(check.stderr, `error: ${path}: /listeners/0/mismatchLog: the directory ${join(dir, 'no-such-dir')} does not exist\ngateway check: ${path} has 1 problem(s)\n`);
  const isDir = file('shadow-dir.json', { listeners: [{ id: 'shadow', type: 'alternateUpstream', serviceLocation: 'http://127.0.0.1:9', mismatchLog: dir }] });
  t.match((await gateway('check', '--config', isDir)).stderr, `/listeners/0/mismatchLog: ${dir} is a directory; name a file in it`);
});

t.test('every middleware type that refuses entries when built says so to the config check', async (t) => {
  t.ok(MIDDLEWARE_TYPES.responseCache.problems, 'responseCache');
  t.ok(MIDDLEWARE_TYPES.rateLimit.problems, 'rateLimit');
});

t.test('more responseCache entries on the local store than a worker LMDB environment holds: refused', async (t) => {
  // 42 fit (6 databases each of 256); the 43rd failed in every worker at start with MDB_DBS_FULL and
  // the workers respawned for ever while `gateway check` called the config ok.
  const caches = (n: number, store = 'local') => Array.from({ length: n }, (_, i) => ({ id: `cache${i}`, type: 'responseCache', store }));
  const over = file('caches-43.json', { middleware: caches(43) });
  const check = await gateway('check', '--config', over);
  t.equal(check.code, 1);
  t.equal(
    check.stderr,
    `error: ${over}: /middleware/42/store: responseCache "cache42" is cache 43 on the "local" store; at most 42 fit in a worker's LMDB environment (6 of its 256 databases each): use fewer caches, or a kvStores store for some\ngateway check: ${over} has 1 problem(s)\n`,
  );
  const start = await gateway('start', '--config', over);
  t.equal(start.code, 1, 'start exits at once instead of respawning crashing workers');
  t.notMatch(start.stdout + start.stderr, /MDB_DBS_FULL/);

  const fits = file('caches-42.json', { middleware: caches(42) });
  t.equal((await gateway('check', '--config', fits)).code, 0, '42 are accepted');
  const remote = file('caches-remote.json', {
    kvStores: { shared: { type: 'redis', url: 'redis://127.0.0.1:6379' } },
    middleware: [...caches(42), ...caches(10, 'shared').map((c, i) => ({ ...c, id: `remote${i}` }))],
  });
  t.equal((await gateway('check', '--config', remote)).code, 0, 'caches on a kvStores store do not count');
});

t.test('42 local caches, the most the check lets through, do open in a worker', async (t) => {
  const running = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: 'http://127.0.0.1:9', endpoints: [{ method: 'GET', path: '/x' }] }], {
      middleware: Array.from({ length: 42 }, (_, i) => ({ id: `cache${i}`, type: 'responseCache', store: 'local' })),
    }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const answer = await httpRequest(running.port, '/x');
  t.equal(answer.status, 502, 'the worker answers (its upstream is down) through 42 caches');
  t.notMatch(running.text() + JSON.stringify(running.lines), /MDB_DBS_FULL/);
});
