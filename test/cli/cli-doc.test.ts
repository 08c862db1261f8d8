// gateway routes / explain --doc FILE: an operator checks a service's doc offline (docs/reference/upstreams.md#lenient-discovery).
import { execFileSync } from 'node:child_process';
import { closeSync, constants, mkdtempSync, openSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { gateway } from '../helpers/cli.js';
import { asYaml, formsDoc, htmlPage, openapi3RestYaml, sloppyDoc } from '../fixtures/lenient-docs.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-cli-doc-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, body);
  return path;
}

const formsYaml = file('forms.yaml', asYaml(formsDoc('/v1')));
const restYaml = file('rest.yml', openapi3RestYaml);
const sloppyJson = file('sloppy.json', JSON.stringify(sloppyDoc));

t.test('routes --doc: a YAML doc\'s endpoints, the file name as their upstream', async (t) => {
  const { code, stdout, stderr } = await gateway('routes', '--json', '--doc', formsYaml, '--doc', restYaml);
  t.equal(code, 0);
  t.equal(stderr, '', 'clean docs: nothing to warn about');
  t.same(
    stdout.trim().split('\n').map((line) => {
      const { method, template, upstream } = JSON.parse(line) as Record<string, string>;
      return [method, template, upstream];
    }),
    [
      ['GET', '/v1/img/{name}{.ext}', formsYaml],
      ['GET', '/v1/items/{name}', formsYaml],
      ['DELETE', '/v1/user/{id: [0-9]+}', formsYaml],
      ['GET', '/v1/user/{id: [0-9]+}', formsYaml],
      ['GET', '/oas/rest/{+rest}', restYaml],
      ['GET', '/v1/files/{+path}', formsYaml],
      ['GET', '/v1/doc{.ext}', formsYaml],
    ],
    'most specific first (docs/reference/routing.md#specificity)',
  );
});

t.test('explain --doc: which form a request takes', async (t) => {
  const { code, stdout } = await gateway('explain', '--doc', formsYaml, 'GET', '/v1/img/cat.png', 'GET', '/v1/user/abc', 'GET', '/v1/files/a/b');
  t.equal(code, 0);
  const lines = stdout.trim().split('\n').map((l) => JSON.parse(l));
  t.same(lines[0].endpoint, { method: 'GET', template: '/v1/img/{name}{.ext}' });
  t.same(lines[0].upstreams, [formsYaml]);
  t.equal(lines[1].status, 404, 'the regex segment refuses "abc"');
  t.same(lines[2].params, { path: 'a/b' });
});

t.test('a sloppy doc: routed, its objections on stderr', async (t) => {
  const { code, stdout, stderr } = await gateway('routes', '--json', '--doc', sloppyJson);
  t.equal(code, 0);
  t.equal(stdout.trim().split('\n').length, 3, 'all three endpoints are in the table');
  t.match(stderr, `warning: doc ${sloppyJson}: GET /sloppy/orders/{orderId}: path parameter {orderId} is not declared`);
  t.match(stderr, `warning: doc ${sloppyJson}: GET /sloppy/customers: unknown field "summery"`);
  t.match(stderr, `warning: doc ${sloppyJson}: POST /sloppy/customers: responses/201: $ref "#/responses/Created" does not resolve`);
});

t.test('a file that is no doc, or none at all: exit 1 saying why', async (t) => {
  const html = file('login.html', htmlPage);
  const r1 = await gateway('routes', '--doc', html);
  t.equal(r1.code, 1);
  t.match(r1.stderr, `gateway routes: ${html}: the file is neither JSON nor YAML: it looks like HTML or XML`);
  const r2 = await gateway('explain', '--doc', file('health.json', '{"status":"UP"}'), 'GET', '/');
  t.equal(r2.code, 1);
  t.match(r2.stderr, /the doc is neither Swagger nor OpenAPI/);
  const r3 = await gateway('routes', '--doc', join(dir, 'missing.yaml'));
  t.equal(r3.code, 1);
  t.match(r3.stderr, 'missing.yaml: cannot be read: no such file');
  const r4 = await gateway('routes', '--doc', formsYaml, '--doc', formsYaml);
  t.equal(r4.code, 2, 'the same file twice is a usage error');
});

t.test('a doc that is a FIFO, a device or too large: refused at once, exit 1, as the config is', async (t) => {
  const fifo = join(dir, 'doc.fifo');
  execFileSync('mkfifo', [fifo]);
  // Read whole, a FIFO without a writer never ended: should the command wait on it, a writer that
  // closes at once ends its read, so that the test fails instead of leaving the process behind.
  const routes = gateway('routes', '--doc', fifo);
  const waited = await Promise.race([routes.then(() => false), new Promise<boolean>((resolve) => setTimeout(() => resolve(true), 10_000))]);
  if (waited) closeSync(openSync(fifo, constants.O_WRONLY));
  t.notOk(waited, 'routes --doc FIFO answers without waiting for a writer');
  const r1 = await routes;
  t.equal(r1.code, 1);
  t.equal(r1.stdout, '');
  t.match(r1.stderr, `gateway routes: ${fifo}: cannot be read: is not a regular file (a device, a pipe or a socket)`);

  const r2 = await gateway('explain', '--doc', '/dev/zero', 'GET', '/');
  t.equal(r2.code, 1);
  t.equal(r2.stdout, '');
  t.match(r2.stderr, 'gateway explain: /dev/zero: cannot be read: is not a regular file (a device, a pipe or a socket)');

  // 32 MiB and one byte, sparse: the most a fetched doc may be, plus one.
  const large = file('large.json', '');
  truncateSync(large, 32 * 1024 * 1024 + 1);
  const r3 = await gateway('routes', '--doc', large);
  t.equal(r3.code, 1);
  t.match(r3.stderr, `gateway routes: ${large}: cannot be read: is 33554433 bytes, more than the 33554432 read from such a file`);

  const r4 = await gateway('routes', '--doc', dir);
  t.equal(r4.code, 1);
  t.match(r4.stderr, `${dir}: cannot be read: is a directory, not a file`);
});

t.test('a doc with a template too deep to route: routes and explain leave it out, say so, and route the rest', async (t) => {
  const ok = { '200': { description: 'ok' } };
  const deep = '/many' + '/{p}'.repeat(3000);
  const deepJson = file('deep.json', JSON.stringify({ swagger: '2.0', info: { title: 'deep', version: '1' }, paths: { [deep]: { get: { responses: ok } }, '/shallow': { get: { responses: ok } } } }));
  const warning = `warning: upstream ${deepJson}: template "/many/{p}/{p}/`;
  const routes = await gateway('routes', '--doc', deepJson);
  t.equal(routes.code, 0);
  t.same(routes.stdout.trim().split(/\s+/), ['GET', '/shallow', deepJson]);
  t.match(routes.stderr, warning);
  t.match(routes.stderr, '(12005 characters) (GET): 3001 path segments; at most 256 are routed');
  const explain = await gateway('explain', '--doc', deepJson, 'GET', '/shallow', 'GET', '/many/1');
  t.equal(explain.code, 0);
  t.same(explain.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { status: number }).status), [200, 404]);
  t.match(explain.stderr, warning);
  t.notMatch(explain.stderr, 'RangeError');
});
