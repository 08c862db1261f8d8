// The CLI's help at the top and per command; routes/explain --fetch (the config's upstreams' docs,
// fetched as `gateway start` would) and --doc URL, against a real upstream serving its doc over HTTP.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { gateway } from '../helpers/cli.js';
import { startUpstream, swaggerDoc } from '../helpers/gateway-process.js';

const upstream = await startUpstream(t, { name: 'users', spec: swaggerDoc('users', { '/users/{id}': ['GET'], '/users/me': ['GET'] }, '/api') });
const dir = mkdtempSync(join(tmpdir(), 'specgate-cli-fetch-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const config = join(dir, 'gateway.json');
writeFileSync(
  config,
  JSON.stringify({
    upstreams: [{ serviceType: 'swagger2', serviceLocation: upstream.location, specPath: '/spec' }],
    discovery: { fetchTimeoutMs: 2000, retries: 0, backoffMs: 100, refreshIntervalMs: 0 },
  }),
);

t.test('--help: the commands at the top, each command its own options', async (t) => {
  const top = await gateway('--help');
  t.equal(top.code, 0);
  for (const command of ['start', 'routes', 'explain', 'hash-key']) t.match(top.stdout, new RegExp(`^  ${command} `, 'm'), `lists ${command}`);
  t.notMatch(top.stdout, /--with-examples/, "not start's options");
  for (const command of ['start', 'routes', 'explain', 'hash-key']) {
    const help = await gateway(command, '--help');
    t.equal(help.code, 0, `${command} --help exits 0`);
    t.match(help.stdout, new RegExp(`^Usage: gateway ${command}`), `${command} --help prints its usage`);
  }
  t.match((await gateway('routes', '--help')).stdout, /--fetch/);
});

t.test('routes without --fetch skips the upstream, with --fetch lists its endpoints', async (t) => {
  const offline = await gateway('routes', '--config', config);
  t.equal(offline.code, 0);
  t.equal(offline.stdout, '', 'nothing offline');
  t.match(offline.stderr, /--fetch fetches them/);
  const fetched = await gateway('routes', '--config', config, '--fetch');
  t.equal(fetched.code, 0);
  t.match(fetched.stdout, new RegExp(`^GET\\s+/api/users/me\\s+${upstream.location}$`, 'm'));
  t.match(fetched.stdout, new RegExp(`^GET\\s+/api/users/\\{id\\}\\s+${upstream.location}$`, 'm'));
});

t.test('explain --fetch routes as the running gateway would', async (t) => {
  const offline = await gateway('explain', '--config', config, 'GET', '/api/users/42');
  t.equal(JSON.parse(offline.stdout).status, 404, 'offline: no endpoint');
  const fetched = await gateway('explain', '--config', config, '--fetch', 'GET', '/api/users/42', 'GET', '/api/users/me');
  t.equal(fetched.code, 0);
  const [byId, me] = fetched.stdout.trim().split('\n').map((l) => JSON.parse(l) as { status: number; endpoint: { template: string } });
  t.match(byId, { status: 200, endpoint: { template: '/api/users/{id}' }, upstreams: [upstream.location] });
  t.match(me, { status: 200, endpoint: { template: '/api/users/me' } });
});

t.test('--doc URL: the doc fetched over HTTP, its URL as the upstream', async (t) => {
  const url = `${upstream.location}/spec`;
  const routes = await gateway('routes', '--json', '--doc', url);
  t.equal(routes.code, 0);
  const lines = routes.stdout.trim().split('\n').map((l) => JSON.parse(l) as { template: string; upstream: string });
  t.same(lines.map((l) => [l.template, l.upstream]), [
    ['/api/users/me', url],
    ['/api/users/{id}', url],
  ]);
  const explain = await gateway('explain', '--doc', url, 'GET', '/api/users/7');
  t.match(JSON.parse(explain.stdout), { status: 200, endpoint: { template: '/api/users/{id}' } });
  const missing = await gateway('routes', '--doc', `${upstream.location}/nothing-here`);
  t.equal(missing.code, 1, 'a URL that serves no doc fails');
  t.match(missing.stderr, /nothing-here/);
});

t.test('--fetch with an upstream that is down: the table of the others, a warning naming it', async (t) => {
  const down = join(dir, 'down.json');
  writeFileSync(
    down,
    JSON.stringify({
      upstreams: [
        { serviceType: 'swagger2', serviceLocation: upstream.location },
        { serviceType: 'swagger2', serviceLocation: 'http://127.0.0.1:9' },
      ],
      discovery: { fetchTimeoutMs: 1000, retries: 0, backoffMs: 100, refreshIntervalMs: 0 },
    }),
  );
  const routes = await gateway('routes', '--config', down, '--fetch');
  t.equal(routes.code, 0);
  t.match(routes.stdout, /\/api\/users\/me/);
  t.match(routes.stderr, /warning: upstream http:\/\/127\.0\.0\.1:9 is not in the table: /);
});
