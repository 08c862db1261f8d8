// A wrong command line is refused with exit 2 and a message saying what is wrong with which argument,
// before anything is read or fetched (docs/cli.md).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { gateway } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-arguments-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const doc = join(dir, 'api.json');
writeFileSync(doc, JSON.stringify({ openapi: '3.0.0', info: { title: 't', version: '1' }, paths: { '/x/{id}': { parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }], get: { responses: { '200': { description: 'ok' } } } } } }));

async function refused(t: Test, args: string[], message: string | RegExp): Promise<void> {
  const r = await gateway(...args);
  t.equal(r.code, 2, `${args.join(' ')}: exit 2 (${r.stderr.trim()})`);
  t.equal(r.stdout, '', 'nothing on stdout');
  t.match(r.stderr, message);
}

t.test('--doc reads files and http(s) URLs; another scheme is refused as such, not as a missing file', async (t) => {
  await refused(t, ['routes', '--doc', 'ftp://x/y'], 'gateway routes: --doc "ftp://x/y": only files and http(s) URLs are read, not ftp: URLs');
  await refused(t, ['explain', '--doc', 'file:///etc/passwd', 'GET', '/'], 'only files and http(s) URLs are read, not file: URLs');
});

t.test('--host, --content-type and the METHOD of explain are checked', async (t) => {
  await refused(t, ['routes', '--doc', doc, '--host', 'bad host'], '--host must be a Host header value, a host name or address with an optional :port; got "bad host"');
  await refused(t, ['explain', '--doc', doc, '--host', 'a/b', 'GET', '/x/1'], '--host must be a Host header value');
  await refused(t, ['explain', '--doc', doc, '--content-type', 'bad', 'POST', '/x/1'], '--content-type must be a media type (type/subtype, e.g. application/json); got "bad"');
  await refused(t, ['explain', '--doc', doc, 'G ET', '/x/1'], '"G ET" is not an HTTP method');
  await refused(t, ['explain', '--doc', doc, 'GET', '/x/1', '', '/x/2'], '"" is not an HTTP method');

  const good = await gateway('explain', '--doc', doc, '--host', 'api.example.com:8080', '--content-type', 'application/json; charset=utf-8', 'GET', '/x/1');
  t.equal(good.code, 0);
  t.equal(good.stderr, '');
  t.equal((JSON.parse(good.stdout) as { status: number }).status, 200, 'good values still route');
});

t.test('--version takes no argument; --help COMMAND is that command\'s help', async (t) => {
  await refused(t, ['--version', 'extra'], 'gateway --version: --version takes no argument; got "extra"');
  for (const command of ['start', 'routes', 'explain', 'check', 'hash-key']) {
    const help = await gateway('--help', command);
    t.equal(help.code, 0);
    t.equal(help.stdout, (await gateway(command, '--help')).stdout, `--help ${command} prints ${command}'s help`);
  }
  await refused(t, ['--help', 'nonsense'], '--help takes one command, one of start, routes, explain, hash-key, check; got "nonsense"');
});

t.test('options are the documented ones: no undocumented short form in a message', async (t) => {
  const r = await gateway('start', '--config');
  t.equal(r.code, 2);
  t.match(r.stderr, "Option '--config <value>' argument missing");
  t.notMatch(r.stderr, /-c, /);
  await refused(t, ['check', '-c', doc], "Unknown option '-c'");
  await refused(t, ['start', '-w', '2', '--config', doc], "Unknown option '-w'");
});

t.test('a negative --workers or --port gets the range message', async (t) => {
  await refused(t, ['start', '--config', doc, '--workers', '-1'], '--workers must be an integer from 0 to 1024, got "-1"');
  await refused(t, ['start', '--config', doc, '--port', '-80'], '--port must be an integer from 0 to 65535, got "-80"');
});

t.test('an option given twice is refused, naming it, in every command; --doc may repeat', async (t) => {
  const good = join(dir, 'good.json');
  writeFileSync(good, JSON.stringify({ port: 0, host: '127.0.0.1' }));
  const bad = join(dir, 'bad.json');
  writeFileSync(bad, JSON.stringify({ port: 'x' }));
  // Taken from its last occurrence, the first value was dropped without a word: bad.json was never checked.
  await refused(t, ['check', '--config', bad, '--config', good], 'gateway check: --config is given more than once; give it once');
  await refused(t, ['check', '--config', good, '--fetch', '--fetch'], '--fetch is given more than once');
  // bad.json: should start take the command line, it stops at the config instead of running a gateway.
  await refused(t, ['start', '--config', bad, '--port', '36401', '--port=36402'], 'gateway start: --port is given more than once; give it once');
  await refused(t, ['start', '--config', bad, '--workers', '1', '--workers', '2'], '--workers is given more than once');
  await refused(t, ['start', '--config', bad, '--config', bad], '--config is given more than once');
  await refused(t, ['routes', '--doc', doc, '--host', 'a.example', '--host', 'b.example'], 'gateway routes: --host is given more than once; give it once');
  await refused(t, ['routes', '--doc', doc, '--json', '--json'], '--json is given more than once');
  await refused(t, ['explain', '--doc', doc, '--accept', 'text/html', '--accept', 'application/json', 'GET', '/x/1'], 'gateway explain: --accept is given more than once; give it once');
  await refused(t, ['explain', '--doc', doc, '--content-type', 'text/plain', '--content-type', 'application/json', 'POST', '/x/1'], '--content-type is given more than once');

  const other = join(dir, 'other.json');
  writeFileSync(other, JSON.stringify({ openapi: '3.0.0', info: { title: 'o', version: '1' }, paths: { '/y': { get: { responses: { '200': { description: 'ok' } } } } } }));
  const both = await gateway('routes', '--doc', doc, '--doc', other);
  t.equal(both.code, 0, '--doc repeats: one upstream per doc');
  t.equal(both.stdout.trim().split('\n').length, 2);
});
