// What comes from input (config keys and values, a config file's name, a doc's templates) reaches the
// terminal escaped: no control character, bidi override, zero-width character or lone surrogate is
// written as it is, and one problem stays one line (src/text/printable.ts).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { gateway } from '../helpers/cli.js';
import { printable } from '../../src/text/printable.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-escaping-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, body: string): string {
  const path = join(dir, name);
  writeFileSync(path, body);
  return path;
}

/** Characters a terminal acts on or hides: none may be in what the CLI writes. */
// eslint-disable-next-line no-control-regex -- finding them is the point
const UNSAFE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u200b\u202e\ud800-\udfff\ufeff]/;

const upstreams = [{ serviceType: 'static', serviceLocation: 'http://127.0.0.1:9', endpoints: [{ method: 'GET', path: '/x/{id}' }] }];
// Written with JSON escapes, as an attacker's file would be: the parsed key holds NUL, ESC, U+202E and a lone surrogate.
const hostileKey = 'a\\u0000b\\u001b[31mred\\u202e\\ud800';
const hostileConfig = `{"upstreams": ${JSON.stringify(upstreams)}, "${hostileKey}": 1, "logLevel": "info\\u200b\\u202e"}`;

t.test('printable: what it escapes, and what it keeps', async (t) => {
  t.equal(printable('/users/{id} é 日本 😀'), '/users/{id} é 日本 😀', 'printable text, pairs of surrogates included, is kept');
  t.equal(printable('a\u0000b\u001b[1m\r\n\t\u007f\u0085'), 'a\\u0000b\\u001b[1m\\u000d\\u000a\\u0009\\u007f\\u0085');
  t.equal(printable('x\u202ey\u2066z\u200b\u2060\ufeff'), 'x\\u202ey\\u2066z\\u200b\\u2060\\ufeff', 'bidi and zero-width characters');
  t.equal(printable('\ud800x\udfff'), '\\ud800x\\udfff', 'lone surrogates');
  t.equal(printable(printable('a\u0000')), printable('a\u0000'), 'idempotent');
  const line = printable(JSON.stringify({ v: 'a\u202e\u0000\ud800' }));
  t.same(JSON.parse(line), { v: 'a\u202e\u0000\ud800' }, 'a JSON line passed through keeps its meaning');
});

t.test('check and start: an unknown key and a value with invisible characters, escaped, one line each', async (t) => {
  const config = file('hostile.json', hostileConfig);
  const check = await gateway('check', '--config', config);
  t.equal(check.code, 1);
  t.notMatch(check.stderr, UNSAFE, 'nothing raw reaches the terminal');
  t.match(check.stderr, `error: ${config}: /a\\u0000b\\u001b[31mred\\u202e\\ud800: unknown key "a\\u0000b\\u001b[31mred\\u202e\\ud800"`);
  t.match(check.stderr, '(got "info\\u200b\\u202e")');
  t.equal(check.stderr.trimEnd().split('\n').length, 3, 'two problems, two lines, and the summary');

  const start = await gateway('start', '--config', config);
  t.equal(start.code, 1);
  t.notMatch(start.stderr, UNSAFE);
  t.match(start.stderr, 'unknown key "a\\u0000b\\u001b[31mred\\u202e\\ud800"');
});

t.test('a --config path holding a newline stays on its line', async (t) => {
  const config = file('new\nline.json', hostileConfig);
  const check = await gateway('check', '--config', config);
  t.equal(check.code, 1);
  const lines = check.stderr.trimEnd().split('\n');
  t.equal(lines.length, 3, check.stderr);
  t.ok(lines.slice(0, 2).every((l) => l.startsWith(`error: ${join(dir, 'new\\u000aline.json')}: /`)), 'each problem line names the file, escaped');
  const routes = await gateway('routes', '--config', config);
  t.equal(routes.code, 1);
  t.equal(routes.stderr.trimEnd().split('\n').length, 2, `two problems, two lines: ${routes.stderr}`);
  const missing = await gateway('routes', '--doc', join(dir, 'gone\n\u001b[2J.json'));
  t.equal(missing.stderr.trimEnd().split('\n').length, 1);
  t.notMatch(missing.stderr, UNSAFE);
});

t.test('routes and explain: a doc\'s templates, escaped in the table, the warnings and the JSON lines', async (t) => {
  const ok = { get: { responses: { '200': { description: 'ok' } } } };
  const doc = file(
    'injected.json',
    JSON.stringify({ openapi: '3.0.0', info: { title: 't', version: '1' }, paths: { '/a\r\nX-Injected: 1': ok, '/b\u0000c\u202ed': ok, '/e/{id}/\u001b[2J{x': ok } }),
  );
  const table = await gateway('routes', '--doc', doc);
  t.equal(table.code, 0);
  t.notMatch(table.stdout + table.stderr, UNSAFE);
  const lines = table.stdout.trimEnd().split('\n');
  t.equal(lines.length, 2, `one line per endpoint: ${table.stdout}`);
  t.match(table.stdout, 'GET  /a\\u000d\\u000aX-Injected: 1');
  t.match(table.stdout, 'GET  /b\\u0000c\\u202ed');
  t.match(table.stderr, 'template "/e/{id}/\\u001b[2J{x" (GET): unbalanced braces', 'a refused template is escaped in the warning');

  const json = await gateway('routes', '--json', '--doc', doc);
  t.notMatch(json.stdout, UNSAFE);
  t.same(
    json.stdout.trimEnd().split('\n').map((l) => (JSON.parse(l) as { template: string }).template).sort(),
    ['/a\r\nX-Injected: 1', '/b\u0000c\u202ed'],
    'the JSON lines still hold the templates exactly',
  );

  const explained = await gateway('explain', '--doc', doc, 'GET', '/b%00c%E2%80%AEd');
  t.notMatch(explained.stdout, UNSAFE);
  t.same((JSON.parse(explained.stdout) as { endpoint: unknown }).endpoint, { method: 'GET', template: '/b\u0000c\u202ed' });
});

t.test('command-line arguments echoed in errors are escaped', async (t) => {
  const unknown = await gateway('st\u001b[2Jart');
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, 'unknown command "st\\u001b[2Jart"');
  const port = await gateway('start', '--config', 'x.json', '--port', '8\u202e0');
  t.equal(port.code, 2);
  t.match(port.stderr, '--port must be an integer from 0 to 65535, got "8\\u202e0"');
  t.notMatch(unknown.stderr + port.stderr, UNSAFE);
});
