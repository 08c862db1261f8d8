// A template the router takes but that never matches, or routes another path than it says, is a
// warning, for a doc's path keys and a static upstream's endpoints alike; a static one names the file
// and the endpoint's pointer (docs/reference/routing.md#path-templates).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { gateway } from '../helpers/cli.js';
import { httpRequest, startGateway, testConfig } from '../helpers/gateway-process.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-template-warnings-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, body: unknown): string {
  const path = join(dir, name);
  writeFileSync(path, JSON.stringify(body, null, 2));
  return path;
}

const QUERY = 'holds "?", which starts a request\'s query: routing reads the path only, so no request matches it';
const DOT = (segment: string) => `holds the dot-segment "${segment}", which the gateway resolves out of every request path: no request matches it`;
const SLASHES = (routed: string) => `starts with "//", and leading slashes count as one: it is routed as "${routed}", never for a path that starts with "//"`;
const TWICE = 'has multiple path placeholders named {id}: a request\'s value for the last one is the only one kept';

const paths = ['/x?q=1', '/../etc', '/a/./b', '//', '/x/{id}/{id}', 'x', 'NaN', '/fine/{id}', '/u/ sp'];
const staticUpstream = { serviceType: 'static', serviceLocation: 'http://127.0.0.1:9', endpoints: paths.map((path) => ({ method: 'GET', path })) };

t.test('check: each static endpoint\'s warning names the file, the field and why; the config is ok', async (t) => {
  const config = file('static.json', { upstreams: [{ serviceType: 'static', serviceLocation: 'http://127.0.0.1:8', endpoints: [{ method: 'GET', path: '/ok' }] }, staticUpstream] });
  const { code, stdout, stderr } = await gateway('check', '--config', config);
  t.equal(code, 0, 'warnings only: the endpoints route, as a doc\'s would');
  t.match(stdout, `${config} is ok: 2 upstream(s), 10 route(s), 7 warning(s)`);
  const at = (index: number, path: string, why: string) => `warning: ${config}: /upstreams/1/endpoints/${index}/path: GET ${path}: ${why}`;
  t.same(stderr.trimEnd().split('\n'), [
    at(0, '/x?q=1', `${QUERY} (a "?" inside a segment is written %3F)`),
    at(1, '/../etc', DOT('..')),
    at(2, '/a/./b', DOT('.')),
    at(3, '//', SLASHES('/')),
    at(4, '/x/{id}/{id}', TWICE),
    at(5, 'x', 'does not start with "/"; it is routed as "/x"'),
    at(6, 'NaN', 'does not start with "/"; it is routed as "/NaN"'),
  ]);

  const routes = await gateway('routes', '--config', config);
  t.equal(routes.code, 0);
  t.equal(routes.stderr, stderr, 'routes says the same');
  t.match(routes.stdout, /^GET\s+\/x\?q=1\s/m, 'and lists them: they are routed');
});

t.test('a doc\'s path keys get the same warnings; a name used twice only its validator\'s', async (t) => {
  const ok = { get: { responses: { '200': { description: 'ok' } } } };
  const doc = file('doc.json', { openapi: '3.0.0', info: { title: 't', version: '1' }, servers: [{ url: '/v1' }], paths: { '/x?q=1': ok, '/a/./b': ok, '/../etc': ok, '//x': ok, '/x/{id}/{id}': ok } });
  const { code, stderr } = await gateway('routes', '--doc', doc);
  t.equal(code, 0);
  t.match(stderr, `warning: doc ${doc}: GET /v1/x?q=1: ${QUERY}`);
  t.match(stderr, `warning: doc ${doc}: GET /v1/a/./b: ${DOT('.')}`);
  t.match(stderr, `warning: doc ${doc}: GET /v1/../etc: ${DOT('..')}`);
  t.notMatch(stderr, 'GET /v1//x:', 'an empty segment inside the template matches a path with one: nothing to warn of');
  t.equal(stderr.split('placeholders named {id}').length - 1, 1, 'the duplicate name once');
  const bare = file('bare.json', { openapi: '3.0.0', info: { title: 't', version: '1' }, paths: { '//x': ok } });
  t.match((await gateway('routes', '--doc', bare)).stderr, `GET //x: ${SLASHES('/x')}`);
});

t.test('start: the primary logs a static upstream\'s problems once, the health report lists them with their pointer', async (t) => {
  const gw = await startGateway(t, { config: testConfig([staticUpstream]), workers: 1, waitFor: (line) => line.msg === 'gateway operational' });
  const logged = gw.lines.filter((l) => /have 7 problems; its endpoints are routed all the same/.test(String(l.msg)));
  t.equal(logged.length, 1, 'one warn line');
  t.equal(logged[0]?.level, 40);
  const health = JSON.parse((await httpRequest(gw.port, '/healthcheck')).body) as { upstreams: Array<{ problems: Array<Record<string, string>> }> };
  t.same(health.upstreams[0]!.problems[0], { method: 'GET', path: '/x?q=1', reason: `${QUERY} (a "?" inside a segment is written %3F)`, pointer: 'endpoints/0/path' });
  t.equal((await httpRequest(gw.port, '/u/%20sp')).status !== 404, true, 'a raw space is matched percent-encoded: no warning, and it routes');
});
