// Every config/examples/*.jsonc starts as-is against the bundled example upstreams (and, for the ones
// with a Redis store, a local redis-server) and answers. Two things are changed for the test only: the
// Redis URL (the test's own redis-server, not 6379) and the admin port (any free one), so that the test
// cannot collide with a gateway or Redis already running on the machine. The public port is --port 0.
// A shadow listener's mismatch log goes to the test's own directory instead of the example's /tmp path.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'jsonc-parser';
import t from 'tap';
import { startExampleUpstreams } from '../../examples/upstreams.js';
import { httpRequest, startGateway } from '../helpers/gateway-process.js';
import { machineLock } from '../helpers/machine-lock.js';
import { startRedisServer } from '../helpers/redis-server.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const EXAMPLES = `${ROOT}config/examples`;

// The example upstreams' ports are fixed: one test file at a time holds them.
const releasePorts = await machineLock('example-ports');
const examples = await startExampleUpstreams();
t.teardown(() => examples.close().finally(releasePorts));
const redis = await startRedisServer();
t.teardown(() => redis.stop());
const scratch = mkdtempSync(join(tmpdir(), 'specgate-examples-run-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));

/** The request each example answers, with the key its comment gives. */
const probes: Record<string, { path: string; headers?: Record<string, string>; service: string }> = {
  'minimal.jsonc': { path: '/files/a/b.txt', service: 'files' },
  'edge.jsonc': { path: '/api/users/42', headers: { 'x-api-key': 'edge-demo-key' }, service: 'users' },
  'full.jsonc': { path: '/api/users/42', headers: { 'x-api-key': 'alice-demo-key' }, service: 'users' },
};

const files = readdirSync(EXAMPLES).filter((f) => f.endsWith('.jsonc'));
t.same(files.sort(), Object.keys(probes).sort(), 'every example config has a probe here');

for (const file of files) {
  t.test(`config/examples/${file} starts and answers`, async (t) => {
    const text = readFileSync(`${EXAMPLES}/${file}`, 'utf8');
    t.match(text, new RegExp(probes[file]!.headers ? probes[file]!.headers!['x-api-key']! : '', 'u'), 'the comment gives the key behind the digest');
    const config = parse(text.replaceAll('redis://127.0.0.1:6379', redis.url.replace(/\/$/, ''))) as Record<string, unknown>;
    if (config.admin) config.admin = { ...(config.admin as object), port: 0 };
    for (const listener of (config.listeners ?? []) as Array<Record<string, unknown>>) {
      if (typeof listener.mismatchLog === 'string') listener.mismatchLog = join(scratch, `${file}-mismatches.jsonl`);
    }
    const gateway = await startGateway(t, { config, workers: 1, waitFor: (l) => l.msg === 'gateway operational', startTimeoutMs: 60_000 });
    const probe = probes[file]!;
    const answer = await httpRequest(gateway.port, probe.path, { headers: probe.headers });
    t.equal(answer.status, 200, `${probe.path}: ${answer.body.slice(0, 200)}`);
    t.match(JSON.parse(answer.body), { service: probe.service });
    if (probe.headers) t.equal((await httpRequest(gateway.port, probe.path)).status, 401, 'without the key: 401');
    gateway.signal('SIGTERM');
    t.same(await gateway.exited, { code: 0, signal: null });
  });
}

t.test('no example leaves a file in the repository', async (t) => {
  t.notOk(existsSync(`${ROOT}shadow-mismatches.jsonl`));
  t.notMatch(readFileSync(`${EXAMPLES}/full.jsonc`, 'utf8'), /"mismatchLog": "(?!\/tmp\/)/, 'the mismatch log goes under /tmp');
});
