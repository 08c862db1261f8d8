// Middleware configs that load but would not do what they seem to, through the real CLI and gateway
// processes: errors (`gateway check` and start refuse them, naming the file and the field) for keys
// that would log in as another consumer and consumers that cannot be sent upstream; warnings
// (printed by `gateway check`, logged at start) for a middleware order that skips a check.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { gateway } from '../helpers/cli.js';
import { startGateway, testConfig } from '../helpers/gateway-process.js';
import { within } from '../helpers/within.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-check-mw-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const digest = (key: string): string => createHash('sha256').update(key).digest('hex');
const upstreams = [{ serviceType: 'static', serviceLocation: 'http://127.0.0.1:9', endpoints: [{ method: 'GET', path: '/items/{id}' }] }];

function file(name: string, middleware: unknown[]): string {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify({ port: 8080, upstreams, middleware }, null, 2));
  return path;
}

t.test("one digest for two consumers, a consumer that is no header value: errors of check and start", async (t) => {
  const bad = file('keys.json', [
    {
      id: 'auth',
      type: 'apiKeyAuth',
      keys: [
        { consumer: 'alice', sha256: digest('shared-key') },
        { consumer: 'alice', sha256: digest('shared-key') },
        { consumer: 'mallory', sha256: digest('shared-key').toUpperCase() },
        { consumer: 'ev"il', sha256: digest('k1') },
        { consumer: 'bob\r\nx-admin: 1', sha256: digest('k2') },
        { consumer: 'zoë', sha256: digest('k3') },
        { consumer: 'carol ', sha256: digest('k4') },
      ],
    },
  ]);
  const check = await gateway('check', '--config', bad);
  t.equal(check.code, 1);
  t.match(check.stderr, `error: ${bad}: /middleware/0/keys/2/sha256: the same digest as keys/0 (case aside): one key cannot be both "alice" (keys/0) and "mallory" (keys/2)`);
  t.notMatch(check.stderr, '/keys/1/', 'the same key twice for the same consumer is no conflict');
  t.match(check.stderr, `${bad}: /middleware/0/keys/3/consumer: "ev\\"il" holds a quote or a backslash`);
  t.match(check.stderr, `${bad}: /middleware/0/keys/4/consumer: "bob\\r\\nx-admin: 1" holds a control character`);
  t.match(check.stderr, `${bad}: /middleware/0/keys/5/consumer: "zoë" holds a control character or a non-ASCII character`);
  t.match(check.stderr, `${bad}: /middleware/0/keys/6/consumer: "carol " starts or ends with a space`);
  t.match(check.stderr, 'has 5 problem(s)');
  // Started as a test gateway is (killed at teardown): a gateway that took the config would serve on.
  const middleware = [{ id: 'auth', type: 'apiKeyAuth', keys: [{ consumer: 'alice', sha256: digest('shared-key') }, { consumer: 'mallory', sha256: digest('shared-key') }] }];
  const start = await startGateway(t, { config: testConfig(upstreams, { middleware }), workers: 1, waitForListening: false });
  const exit = await within(start.exited, 20_000, 'still running');
  t.match(exit, { code: 1 }, 'start refuses it too');
  t.match(start.text(), '/middleware/0/keys/1/sha256: the same digest as keys/0 (case aside): one key cannot be both "alice" (keys/0) and "mallory" (keys/1)');
});

const orderWarnings = [
  { id: 'cache', type: 'responseCache' },
  { id: 'perConsumer', type: 'rateLimit', limit: 10, windowMs: 1000, key: 'consumer' },
  { id: 'auth', type: 'apiKeyAuth', keys: [{ consumer: 'alice', sha256: digest('k') }] },
  { id: 'after', type: 'rateLimit', limit: 10, windowMs: 1000, key: 'consumer' },
];

t.test('a cache before the auth, a consumer rate limit with no auth before it: warnings of check', async (t) => {
  const path = file('order.json', orderWarnings);
  const check = await gateway('check', '--config', path);
  t.equal(check.code, 0, 'warnings do not fail the check');
  t.match(check.stdout, 'is ok: 1 upstream(s), 1 route(s), 2 warning(s)');
  t.match(check.stderr, `warning: ${path}: /middleware/0: responseCache "cache" runs before apiKeyAuth "auth" (/middleware/2): a cached answer is served before any key is checked`);
  t.match(check.stderr, `warning: ${path}: /middleware/1/key: rateLimit "perConsumer" is keyed by "consumer" but no apiKeyAuth runs before it`);
  t.notMatch(check.stderr, '/middleware/3', 'a consumer rate limit after the auth is fine');
  const none = await gateway('check', '--config', file('none.json', [{ id: 'byIp', type: 'rateLimit', limit: 10, windowMs: 1000, key: 'consumer' }]));
  t.match(none.stderr, 'warning: ', 'with no apiKeyAuth at all');
});

t.test('start logs the same warnings and serves', async (t) => {
  const started = await startGateway(t, { config: testConfig(upstreams, { middleware: orderWarnings }), workers: 1 });
  const line = await started.waitForLog((l) => l.pointer === '/middleware/0', 5000, 'the warning line');
  t.equal(line.level, 40);
  t.match(line.msg, 'responseCache "cache" runs before apiKeyAuth "auth"');
  t.ok(started.lines.some((l) => l.pointer === '/middleware/1/key' && l.level === 40));
});
