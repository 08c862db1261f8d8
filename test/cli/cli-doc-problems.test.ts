// What a doc loses silently is a problem of the doc (docs/reference/upstreams.md#lenient-discovery): a
// loop of $refs that never reaches a path item, a doc with nothing to route, a key written twice (JSON
// keeps the last). Read from a file by `routes --doc`, and fetched by `check --fetch`.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { gateway } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-doc-problems-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

const info = '"openapi": "3.0.0", "info": {"title": "t", "version": "1"}';
const ok = '{"responses": {"200": {"description": "ok"}}}';
const docs: Record<string, string> = {
  loop: `{${info}, "paths": {"/a": {"$ref": "#/paths/~1b"}, "/b": {"$ref": "#/paths/~1a"}}}`,
  'loop-and-more': `{${info}, "paths": {"/a": {"$ref": "#/paths/~1a"}, "/ok": {"get": ${ok}}}}`,
  'parameter-loop': `{${info}, "paths": {"/p/{id}": {"get": {"parameters": [{"$ref": "#/components/parameters/p"}], "responses": {"200": {"description": "ok"}}}}},
    "components": {"parameters": {"p": {"$ref": "#/components/parameters/q"}, "q": {"$ref": "#/components/parameters/p"}}}}`,
  // A recursive schema is no loop: its $ref reaches a schema.
  recursive: `{${info}, "paths": {"/tree": {"get": {"responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}}}}}},
    "components": {"schemas": {"Node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}}}}`,
  empty: `{${info}, "paths": {}}`,
  duplicates: `{${info},\n "paths": {\n  "/a": {"get": ${ok}},\n  "/a": {"post": ${ok}},\n  "/b": {"get": {"responses": {"200": {"description": "ok"}, "200": {"description": "ok"}}}}\n }\n}`,
};

const LOOP_A = '$ref "#/paths/~1b" never reaches a value: #/paths/~1b -> #/paths/~1a -> #/paths/~1b goes round in a loop';
const NOTHING = 'the doc has no operation to route (no path item holds one), so no request reaches this upstream through the gateway';

t.test('routes --doc: a loop of $refs and a doc with nothing to route are warned about', async (t) => {
  const loop = await gateway('routes', '--doc', file('loop.json', docs.loop!));
  t.equal(loop.code, 0);
  t.equal(loop.stdout, '', 'nothing to route');
  t.match(loop.stderr, `warning: doc ${join(dir, 'loop.json')}: (path item) /a: ${LOOP_A}`);
  t.match(loop.stderr, `(path item) /b: $ref "#/paths/~1a" never reaches a value`);
  t.match(loop.stderr, `warning: doc ${join(dir, 'loop.json')}: ${NOTHING}`);

  const more = await gateway('routes', '--doc', file('more.json', docs['loop-and-more']!));
  t.match(more.stdout, /^GET\s+\/ok\s/);
  t.match(more.stderr, '(path item) /a: $ref "#/paths/~1a" never reaches a value: #/paths/~1a -> #/paths/~1a goes round in a loop');
  t.notMatch(more.stderr, NOTHING);

  const parameter = await gateway('routes', '--doc', file('parameter.json', docs['parameter-loop']!));
  t.match(parameter.stdout, /^GET\s+\/p\/\{id\}\s/);
  t.match(parameter.stderr, 'GET /p/{id}: parameters/0: $ref "#/components/parameters/p" never reaches a value');

  const recursive = await gateway('routes', '--doc', file('recursive.json', docs.recursive!));
  t.equal(recursive.stderr, '', 'a recursive schema is not a loop');

  const empty = await gateway('routes', '--doc', file('empty.json', docs.empty!));
  t.equal(empty.code, 0);
  t.match(empty.stderr, NOTHING);
});

t.test('routes --doc: a key written twice names where, with lines and columns', async (t) => {
  const path = file('duplicates.json', docs.duplicates!);
  const { code, stdout, stderr } = await gateway('routes', '--doc', path);
  t.equal(code, 0);
  t.same(stdout.trim().split('\n').map((l) => l.split(/\s+/).slice(0, 2).join(' ')).sort(), ['GET /b', 'POST /a'], 'the last one is kept');
  t.match(stderr, `warning: doc ${path}: POST /a: duplicate key "/a" at line 4, column 3 (first at line 3, column 3); JSON keeps the last one only`);
  t.match(stderr, `warning: doc ${path}: GET /b: responses/200: duplicate key "200" at line 5, column `);
});

t.test('check --fetch: the same problems are warnings of the fetched doc', async (t) => {
  const server = createServer((req, res) => {
    const doc = docs[(req.url ?? '').split('/')[1] ?? ''];
    res.writeHead(doc === undefined ? 404 : 200, { 'content-type': 'application/json' });
    res.end(doc ?? '');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const location = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const config = (name: string, specPath: string) =>
    file(name, JSON.stringify({ discovery: { fetchTimeoutMs: 2000, retries: 0, backoffMs: 0 }, upstreams: [{ serviceType: 'openapi3', serviceLocation: location, specPath }] }));

  const loop = await gateway('check', '--fetch', '--config', config('loop-config.json', '/loop/spec'));
  t.equal(loop.code, 0, 'warnings: the doc is read all the same');
  t.match(loop.stdout, 'is ok: 1 upstream(s), 0 route(s), 1 doc(s) fetched, 3 warning(s)');
  t.match(loop.stderr, `warning: upstream ${location}: doc: (path item) /a: ${LOOP_A}`);
  t.match(loop.stderr, `warning: upstream ${location}: doc: ${NOTHING}`);

  const duplicates = await gateway('check', '--fetch', '--config', config('dup-config.json', '/duplicates/spec'));
  t.equal(duplicates.code, 0);
  t.match(duplicates.stderr, `warning: upstream ${location}: doc: POST /a: duplicate key "/a" at line 4, column 3 (first at line 3, column 3)`);
});
