import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { gateway } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-cli-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function configFile(name: string, body: unknown): string {
  const file = join(dir, name);
  writeFileSync(file, typeof body === 'string' ? body : JSON.stringify(body, null, 2));
  return file;
}

const config = configFile('static.json', {
  port: 8080,
  workers: 1,
  paths: { healthcheck: '/healthcheck', metrics: '/metrics', spec: '/spec' },
  upstreams: [
    {
      serviceType: 'static',
      serviceLocation: 'http://127.0.0.1:9001',
      endpoints: [
        { method: 'GET', path: '/users/{id}' },
        { method: 'GET', path: '/users/me' },
        { method: 'DELETE', path: '/users/{id}' },
        { method: 'GET', path: '/files/{+path}' },
        { method: 'GET', path: '/broken/{x' },
      ],
    },
    { serviceType: 'static', serviceLocation: 'http://127.0.0.1:9002', weight: 2, endpoints: [{ method: 'GET', path: '/users/{userId}' }] },
  ],
});

t.test('gateway routes prints the table in specificity order, one endpoint per line', async (t) => {
  const { code, stdout, stderr } = await gateway('routes', '--config', config);
  t.equal(code, 0);
  t.same(
    stdout.trim().split('\n').map((l) => l.split(/\s+/)),
    [
      ['GET', '/users/me', 'http://127.0.0.1:9001'],
      ['DELETE', '/users/{id}', 'http://127.0.0.1:9001'],
      ['GET', '/users/{id}', 'http://127.0.0.1:9001'],
      ['GET', '/users/{userId}', 'http://127.0.0.1:9002'],
      ['GET', '/files/{+path}', 'http://127.0.0.1:9001'],
    ],
  );
  t.match(stderr, 'upstream http://127.0.0.1:9001: template "/broken/{x" (GET): unbalanced braces', 'a bad template is named, the rest loads');
});

t.test('gateway explain prints one JSON line per request', async (t) => {
  const { code, stdout } = await gateway('explain', '--config', config, 'GET', '/users/42?x=1', 'PUT', '/users/me', 'GET', '/files/a/b/', 'GET', '/nope', 'GET', '/a/%zz', 'OPTIONS', '/users/7');
  t.equal(code, 0);
  const lines = stdout.trim().split('\n').map((l) => JSON.parse(l));
  t.same(lines[0], { method: 'GET', path: '/users/42?x=1', status: 200, endpoint: { method: 'GET', template: '/users/{id}' }, allow: [], upstreams: ['http://127.0.0.1:9001', 'http://127.0.0.1:9002'], params: { id: '42' } });
  t.same(lines[1], { method: 'PUT', path: '/users/me', status: 405, endpoint: null, allow: ['GET', 'HEAD', 'DELETE', 'OPTIONS'], upstreams: [], params: {} });
  t.same(lines[2].endpoint, { method: 'GET', template: '/files/{+path}' });
  t.same(lines[2].params, { path: 'a/b' }, 'the trailing slash is not part of the capture');
  t.equal(lines[3].status, 404);
  t.equal(lines[4].status, 400, 'invalid percent-encoding');
  t.equal(lines[5].status, 200);
  t.same(lines[5].allow, ['GET', 'HEAD', 'DELETE', 'OPTIONS'], 'automatic OPTIONS');
});

t.test('without --host, routes and explain answer for a Host no upstream lists, as the gateway routes one', async (t) => {
  const open = 'http://127.0.0.1:9011';
  const api = 'http://127.0.0.1:9013';
  const hosted = configFile('hosts.json', {
    upstreams: [
      { serviceType: 'static', serviceLocation: open, endpoints: [{ method: 'GET', path: '/users/{id}' }] },
      { serviceType: 'static', serviceLocation: api, hosts: ['api.example.com'], endpoints: [{ method: 'GET', path: '/h/{x}' }, { method: 'GET', path: '/users/{id}' }] },
    ],
  });
  const doc = configFile('doc.json', { openapi: '3.0.0', info: { title: 'd', version: '1' }, paths: { '/d': { get: { responses: { '200': { description: 'ok' } } } } } });
  const note = `note: without --host, the table is that of a request whose Host no upstream lists; 1 upstream(s) serve only the hosts they list and are left out (--host HOST for a request with that Host): ${api} (api.example.com)`;
  const lines = (stdout: string): string[][] => stdout.trim().split('\n').map((l) => l.split(/\s+/));

  const routes = await gateway('routes', '--config', hosted, '--doc', doc);
  t.equal(routes.code, 0);
  t.same(lines(routes.stdout), [['GET', '/users/{id}', open], ['GET', '/d', doc]], 'no endpoint of the upstream that lists hosts');
  t.equal(routes.stderr.trim(), note, 'which upstreams are left out, and their hosts');
  const forApi = await gateway('routes', '--config', hosted, '--doc', doc, '--host', 'API.example.com:8080');
  t.equal(forApi.code, 0);
  t.same(lines(forApi.stdout), [['GET', '/h/{x}', api], ['GET', '/users/{id}', open], ['GET', '/users/{id}', api], ['GET', '/d', doc]], '--host: its upstreams too; a doc serves every host');
  t.equal(forApi.stderr, '');
  const other = await gateway('routes', '--config', hosted, '--host', 'other.example.com');
  t.same(lines(other.stdout), [['GET', '/users/{id}', open]], 'a host nobody lists: what no --host lists');

  const explain = await gateway('explain', '--config', hosted, 'GET', '/h/1', 'GET', '/users/1');
  t.equal(explain.code, 0);
  const [h, users] = explain.stdout.trim().split('\n').map((l) => JSON.parse(l));
  t.same(h, { method: 'GET', path: '/h/1', status: 404, endpoint: null, allow: [], upstreams: [], params: {} }, 'the gateway answers 404 to a Host api.example.com is not');
  t.same(users.upstreams, [open], 'balanced over the upstreams without hosts only');
  t.equal(explain.stderr.trim(), note);
  const explainApi = await gateway('explain', '--config', hosted, '--host', 'api.example.com', 'GET', '/h/1', 'GET', '/users/1');
  const [hApi, usersApi] = explainApi.stdout.trim().split('\n').map((l) => JSON.parse(l));
  t.equal(hApi.status, 200);
  t.same(usersApi.upstreams, [open, api]);

  const onlyHosted = configFile('only-hosted.json', { upstreams: [{ serviceType: 'static', serviceLocation: api, hosts: ['api.example.com'], endpoints: [{ method: 'GET', path: '/h/{x}' }] }] });
  const none = await gateway('routes', '--config', onlyHosted);
  t.equal(none.code, 0);
  t.equal(none.stdout, '', 'every upstream lists hosts: nothing serves a host none lists');
  t.match(none.stderr, '1 upstream(s) serve only the hosts they list');
});

t.test('explain: a method is case-sensitive, and one uWS does not deliver says so', async (t) => {
  const dav = configFile('dav.json', {
    upstreams: [{ serviceType: 'static', serviceLocation: 'http://127.0.0.1:9021', endpoints: [{ method: 'GET', path: '/a/{id}' }, { method: 'PROPFIND', path: '/dav/{x}' }] }],
  });
  const { code, stdout } = await gateway('explain', '--config', dav, 'get', '/a/1', 'GET', '/a/1', 'PROPFIND', '/dav/x', 'Get', '/healthcheck');
  t.equal(code, 0);
  const [lower, upper, propfind, builtin] = stdout.trim().split('\n').map((l) => JSON.parse(l));
  const note = /^not delivered: uWebSockets\.js closes the connection at a method outside GET HEAD POST PUT DELETE CONNECT OPTIONS TRACE PATCH \(case-sensitive\), with no answer/;
  t.match(lower, { method: 'get', path: '/a/1', status: 405, endpoint: null, allow: ['GET', 'HEAD', 'OPTIONS'] }, '"get" is not GET (RFC 9110 9.1): the table has no such method there');
  t.match(lower.note, note, 'and the gateway never sees it');
  t.same(upper, { method: 'GET', path: '/a/1', status: 200, endpoint: { method: 'GET', template: '/a/{id}' }, allow: [], upstreams: ['http://127.0.0.1:9021'], params: { id: '1' } }, 'GET: no note');
  t.match(propfind, { method: 'PROPFIND', status: 200, endpoint: { method: 'PROPFIND', template: '/dav/{x}' } }, 'an extension method: the table routes it');
  t.match(propfind.note, note, 'but uWS closes the connection');
  t.match(builtin, { method: 'Get', builtin: 'healthcheck' });
  t.match(builtin.note, note, 'before the built-in paths too');
});

t.test('explain: parameters named like Object.prototype members are reported', async (t) => {
  const file = configFile('proto-params.json', {
    upstreams: [{ serviceType: 'static', serviceLocation: 'http://127.0.0.1:9001', endpoints: [{ method: 'GET', path: '/x/{__proto__}/{constructor}' }] }],
  });
  const { code, stdout } = await gateway('explain', '--config', file, 'GET', '/x/a/b');
  t.equal(code, 0);
  const line = JSON.parse(stdout.trim()) as { params: Record<string, string> };
  t.same(Object.entries(line.params), [['__proto__', 'a'], ['constructor', 'b']]);
});

t.test('a config that is not JSON, or breaks the schema, is refused with file, field and reason', async (t) => {
  const notJson = configFile('broken.json', '{ "port": 8080, ');
  const r1 = await gateway('routes', '--config', notJson);
  t.equal(r1.code, 1);
  t.match(r1.stderr, notJson);
  const badField = configFile('bad-field.json', { port: 'eighty', upstreams: [] });
  const r2 = await gateway('explain', '--config', badField, 'GET', '/');
  t.equal(r2.code, 1);
  t.match(r2.stderr, `${badField}: /port:`);
  const r3 = await gateway('routes');
  t.equal(r3.code, 2, 'usage error');
  t.match(r3.stderr, '--config FILE is required');
  const r4 = await gateway('explain', '--config', config, 'GET');
  t.equal(r4.code, 2);
  t.match(r4.stderr, 'METHOD PATH pairs');
});

t.test('explain answers as the gateway does before routing: refused targets, then built-in paths', async (t) => {
  const endpoints = ['/healthcheck', '/spec', '/metrics', '/files/{name}'].map((path) => ({ method: 'GET', path }));
  const declaring = configFile('builtins.json', { upstreams: [{ serviceType: 'static', serviceLocation: 'http://127.0.0.1:9001', endpoints }] });
  const { code, stdout } = await gateway('explain', '--config', declaring, 'GET', '/healthcheck', 'GET', '/spec?format=openapi3', 'POST', '/healthcheck/', 'GET', '/files/a%2Fb', 'GET', '/files/a b', 'GET', '/files/a.txt');
  t.equal(code, 0);
  const lines = stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  t.same(lines[0], { method: 'GET', path: '/healthcheck', status: 200, endpoint: null, allow: [], upstreams: [], params: {}, builtin: 'healthcheck' }, 'the built-in wins over the upstream');
  t.match(lines[1], { status: 200, endpoint: null, upstreams: [], builtin: 'spec' });
  t.match(lines[2], { status: 405, allow: ['GET', 'HEAD', 'OPTIONS'], builtin: 'healthcheck' }, 'a trailing slash is the built-in too, which takes GET only');
  t.match(lines[3], { status: 400, endpoint: null, upstreams: [], detail: /encoded "\/"/ }, 'encodedSlashes defaults to "reject"');
  t.match(lines[4], { status: 400, detail: 'must be percent-encoded' });
  t.match(lines[5], { status: 200, endpoint: { template: '/files/{name}' } });

  // The config decides: its built-in paths, metrics off, encoded slashes kept.
  const moved = configFile('builtins-moved.json', {
    paths: { healthcheck: '/_health', metrics: '/_metrics', spec: '/_spec' },
    metrics: { enabled: false },
    encodedSlashes: 'keep',
    upstreams: [{ serviceType: 'static', serviceLocation: 'http://127.0.0.1:9001', endpoints }],
  });
  const other = await gateway('explain', '--config', moved, 'GET', '/healthcheck', 'GET', '/_health', 'GET', '/_metrics', 'GET', '/files/a%2Fb');
  const answers = other.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  t.match(answers[0], { status: 200, endpoint: { template: '/healthcheck' } }, 'off the built-in paths, the upstream gets it');
  t.match(answers[1], { status: 200, builtin: 'healthcheck' });
  t.match(answers[2], { status: 404, builtin: undefined }, 'metrics disabled: no built-in there');
  t.match(answers[3], { status: 200, params: { name: 'a%2Fb' } });
});

t.test('routes marks the endpoints a built-in path shadows', async (t) => {
  const file = configFile('shadowed.json', {
    upstreams: [{ serviceType: 'static', serviceLocation: 'http://127.0.0.1:9001', endpoints: ['/healthcheck', '/spec', '/{page}', '/users'].map((path) => ({ method: 'GET', path })) }],
  });
  const text = await gateway('routes', '--config', file);
  t.equal(text.code, 0);
  t.same(text.stdout.trim().split('\n'), [
    'GET  /healthcheck  http://127.0.0.1:9001  shadowed by built-in /healthcheck',
    'GET  /spec         http://127.0.0.1:9001  shadowed by built-in /spec',
    'GET  /users        http://127.0.0.1:9001',
    'GET  /{page}       http://127.0.0.1:9001  except /metrics (built-in)',
  ]);
  const json = await gateway('routes', '--json', '--config', file);
  const lines = json.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
  t.match(lines[0], { template: '/healthcheck', shadowedBy: ['/healthcheck'], shadowed: true });
  t.match(lines[3], { template: '/{page}', shadowedBy: ['/metrics'], shadowed: false });
  t.notOk('shadowedBy' in lines[2]!, 'an endpoint no built-in path reaches is not marked');
});
