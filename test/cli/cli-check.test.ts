// `gateway check`, `gateway --version`, ${VAR} substitution and GATEWAY_CONFIG, through the real CLI
// process with real config files (and, for --fetch, a real upstream serving its doc).
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { reapOnExit } from '../helpers/reaper.js';
import { untapped } from '../helpers/untapped.js';
import { MAIN, startUpstream, swaggerDoc } from '../helpers/gateway-process.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-check-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, config: unknown): string {
  const path = join(dir, name);
  writeFileSync(path, typeof config === 'string' ? config : JSON.stringify(config, null, 2));
  return path;
}

/** Runs the CLI with exactly this environment (plus PATH), so the test machine's variables play no part. */
function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(...untapped(process.execPath, [MAIN, ...args], {}), { env: { PATH: process.env.PATH ?? '', ...env }, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** A port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const staticUpstream = (location: string) => ({ serviceType: 'static', serviceLocation: location, endpoints: [{ method: 'GET', path: '/items/{id}' }] });
const fastDiscovery = { fetchTimeoutMs: 2000, retries: 0, backoffMs: 0, refreshIntervalMs: 0 };

t.test('--version names the gateway, Node.js and the native build', async (t) => {
  const { code, stdout } = await cli(['--version']);
  t.equal(code, 0);
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  t.match(stdout, new RegExp(`^gateway ${pkg.version.replace(/\./g, '\\.')}\n`));
  t.match(stdout, `node ${process.version}, uWebSockets.js `);
});

t.test('a good config: exit 0, and docs are not fetched without --fetch', async (t) => {
  const good = file('good.json', { port: 8080, upstreams: [staticUpstream('http://127.0.0.1:9'), { serviceType: 'swagger2', serviceLocation: 'http://127.0.0.1:10' }] });
  const { code, stdout, stderr } = await cli(['check', '--config', good]);
  t.equal(code, 0, stderr);
  t.match(stdout, `${good} is ok: 2 upstream(s), 1 route(s); 1 upstream doc(s) not fetched (--fetch checks them)`);
  t.equal(stderr, '');
});

t.test('a bad config: exit 1 with every problem listed, each naming the file and the field', async (t) => {
  const bad = file('bad.json', {
    port: 70000,
    timeouts: { upstreamMS: 1 },
    upstreams: [staticUpstream('ftp://nowhere')],
    metrics: { histogramBucketsS: [0.1, 0.01] },
  });
  const { code, stdout, stderr } = await cli(['check', '--config', bad]);
  t.equal(code, 1);
  t.equal(stdout, '');
  const lines = stderr.trim().split('\n');
  t.match(stderr, `error: ${bad}: /port: `);
  t.match(stderr, `error: ${bad}: /timeouts/upstreamMS: unknown key "upstreamMS" (did you mean "upstreamMs"?)`);
  t.ok(lines.length >= 3, 'several problems, one per line');
  t.match(lines[lines.length - 1], new RegExp(`^gateway check: ${bad} has \\d+ problem\\(s\\)$`));

  // Once the schema passes, the rules' problems are all listed too.
  const rules = file('rules.json', { upstreams: [staticUpstream('ftp://nowhere')], metrics: { histogramBucketsS: [0.1, 0.01, 1, 1.001] } });
  const second = await cli(['check', '--config', rules]);
  t.equal(second.code, 1);
  t.match(second.stderr, `${rules}: /upstreams/0/serviceLocation: `);
  t.match(second.stderr, `${rules}: /metrics/histogramBucketsS: bound 1 (0.01) must be greater than bound 0 (0.1): bounds are ascending`);

  const missing = await cli(['check', '--config', join(dir, 'nope.json')]);
  t.equal(missing.code, 1);
  t.match(missing.stderr, 'cannot read the config: no such file');
  const usage = await cli(['check']);
  t.equal(usage.code, 2, 'no config and no GATEWAY_CONFIG is a usage error');
  t.match(usage.stderr, 'GATEWAY_CONFIG');
});

t.test('a static template the router refuses is an error naming the file and the endpoint', async (t) => {
  const config = file('templates.json', {
    upstreams: [
      staticUpstream('http://127.0.0.1:9'),
      {
        serviceType: 'static',
        serviceLocation: 'http://127.0.0.1:10',
        endpoints: [
          { method: 'GET', path: '/b/{id}' },
          { method: 'GET', path: '/b/{id' },
          { method: 'GET', path: '/b/{name}' },
        ],
      },
    ],
  });
  const { code, stderr } = await cli(['check', '--config', config]);
  t.equal(code, 1, 'a typo in the file fails the check (start would serve the other endpoints)');
  t.match(stderr, `error: ${config}: /upstreams/1/endpoints/1/path: template "/b/{id" (GET): unbalanced braces`);
  t.match(stderr, `error: ${config}: /upstreams/1/endpoints/2/path: template "/b/{name}" (GET): equivalent to "/b/{id}"`, 'the later of an equivalent pair');
  t.match(stderr, `gateway check: ${config} has 2 problem(s)`);
});

t.test('requestId.header: a name the gateway writes or reads itself is refused, naming the file, the field and why', async (t) => {
  const framing = file('reqid-te.json', { upstreams: [staticUpstream('http://127.0.0.1:9')], requestId: { header: 'Transfer-Encoding' } });
  const te = await cli(['check', '--config', framing]);
  t.equal(te.code, 1, 'gateway check fails');
  t.match(te.stderr, `error: ${framing}: /requestId/header: "Transfer-Encoding" cannot carry the request ID: it frames the message`);
  const withKey = file('reqid-key.json', {
    upstreams: [staticUpstream('http://127.0.0.1:9')],
    middleware: [{ id: 'keys', type: 'apiKeyAuth', header: 'X-Key', keys: [{ consumer: 'c', sha256: 'a'.repeat(64) }] }],
    requestId: { header: 'x-key' },
  });
  const key = await cli(['check', '--config', withKey]);
  t.equal(key.code, 1);
  t.match(key.stderr, `${withKey}: /requestId/header: "x-key" cannot carry the request ID: an apiKeyAuth middleware reads the API key from it`);
  const own = file('reqid-own.json', { upstreams: [staticUpstream('http://127.0.0.1:9')], requestId: { header: 'x-correlation-id' } });
  t.equal((await cli(['check', '--config', own])).code, 0, 'a name of its own is fine');
  const start = await cli(['start', '--config', framing]);
  t.not(start.code, 0, 'start refuses it too');
  t.match(start.stderr, `${framing}: /requestId/header: `);
});

t.test('--fetch: a served doc passes, an unreachable one fails naming its upstream', async (t) => {
  const upstream = await startUpstream(t, { name: 'docs', spec: swaggerDoc('docs', { '/users/{id}': ['get'], '/users': ['get', 'post'] }) });
  const port = await closedPort();
  const ok = file('fetch-ok.json', { discovery: fastDiscovery, upstreams: [{ serviceType: 'swagger2', serviceLocation: upstream.location }] });
  const good = await cli(['check', '--config', ok, '--fetch']);
  t.equal(good.code, 0, good.stderr);
  t.match(good.stdout, `is ok: 1 upstream(s), 3 route(s), 1 doc(s) fetched`);

  const unreachable = file('fetch-bad.json', {
    discovery: fastDiscovery,
    upstreams: [{ serviceType: 'swagger2', serviceLocation: upstream.location }, { serviceType: 'openapi3', serviceLocation: `http://127.0.0.1:${port}` }],
  });
  const bad = await cli(['check', '--config', unreachable, '--fetch']);
  t.equal(bad.code, 1);
  t.match(bad.stderr, `error: upstream http://127.0.0.1:${port}: `);
  t.notMatch(bad.stderr, `error: upstream ${upstream.location}`, 'the reachable upstream is not blamed');
  t.match(bad.stderr, `has 1 problem(s)`);
  const offline = await cli(['check', '--config', unreachable]);
  t.equal(offline.code, 0, 'without --fetch the docs are not fetched');
});

t.test('${VAR} and ${VAR:-default} in string values', async (t) => {
  const config = file('env.json', {
    name: '${GATEWAY_NAME:-edge}',
    upstreams: [staticUpstream('${UPSTREAM_URL}'), staticUpstream('http://${OTHER_HOST:-127.0.0.2}:81')],
  });
  const routes = await cli(['routes', '--config', config], { UPSTREAM_URL: 'http://127.0.0.1:8081' });
  t.equal(routes.code, 0, routes.stderr);
  t.match(routes.stdout, 'http://127.0.0.1:8081');
  t.match(routes.stdout, 'http://127.0.0.2:81', 'the default when unset');
  const withOther = await cli(['routes', '--config', config], { UPSTREAM_URL: 'http://127.0.0.1:8081', OTHER_HOST: '127.0.0.3' });
  t.match(withOther.stdout, 'http://127.0.0.3:81', 'the variable when set');

  const unset = await cli(['check', '--config', config]);
  t.equal(unset.code, 1);
  t.match(unset.stderr, `${config}: /upstreams/0/serviceLocation: environment variable UPSTREAM_URL is not set and \${UPSTREAM_URL} has no default`);

  const odd = file('env-bad.json', { name: '${not a name}', upstreams: [], paths: { metrics: '/m/$${x}' } });
  const oddRun = await cli(['check', '--config', odd]);
  t.equal(oddRun.code, 1);
  t.match(oddRun.stderr, `${odd}: /name: "\${not a name}" is not a variable reference`);
  t.notMatch(oddRun.stderr, '/paths/metrics', '$${ is a literal ${, not a reference');
});

t.test('GATEWAY_CONFIG is the default config of check and start', async (t) => {
  const config = file('from-env.json', { host: '127.0.0.1', port: 0, workers: 1, upstreams: [staticUpstream('http://127.0.0.1:9')] });
  const check = await cli(['check'], { GATEWAY_CONFIG: config });
  t.equal(check.code, 0, check.stderr);
  t.match(check.stdout, `${config} is ok`);

  const child = spawn(...untapped(process.execPath, [MAIN, 'start', '--port', '0'], {}), { env: { PATH: process.env.PATH ?? '', GATEWAY_CONFIG: config }, stdio: ['ignore', 'pipe', 'pipe'] });
  reapOnExit(child, { group: false });
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  const listening = await new Promise<boolean>((resolve) => {
    let out = '';
    const timer = setTimeout(() => resolve(false), 30_000);
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('"gateway listening"')) {
        clearTimeout(timer);
        resolve(true);
      }
    });
    child.on('exit', () => resolve(false));
  });
  t.ok(listening, 'start read the config GATEWAY_CONFIG names');
  const exited = new Promise((resolve) => child.on('exit', resolve));
  child.kill('SIGTERM');
  await exited;
});
