// A start that fails says why on stderr as readable text (file, JSON pointer, reason), the same text
// `gateway routes` prints for that config, and keeps the JSON log line for log collectors.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { gateway } from '../helpers/cli.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-start-errors-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const file = join(dir, 'bad.json');
writeFileSync(
  file,
  JSON.stringify({
    port: 'eighty',
    upstreams: [{ serviceType: 'swagger3', serviceLocation: 'http://127.0.0.1:9', specPath: '/spec' }],
  }),
);

t.test('a config that does not load: readable lines on stderr, the JSON line on stdout', async (t) => {
  const start = await gateway('start', '--config', file);
  t.equal(start.code, 1);
  const lines = start.stderr.trimEnd().split('\n');
  t.ok(lines.length >= 2, `one line per problem: ${start.stderr}`);
  t.match(lines[0], new RegExp(`^gateway start: ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: /`), 'file and JSON pointer first');
  t.match(start.stderr, `${file}: /port: `);
  t.match(start.stderr, `${file}: /upstreams/0/serviceType: `);
  t.notMatch(start.stderr, /\\n|"level"/, 'no escaped newlines, no JSON');
  const routes = await gateway('routes', '--config', file);
  t.equal(start.stderr.replace(/^gateway start: /, ''), routes.stderr.replace(/^gateway routes: /, ''), 'the same text as gateway routes');
  const json = start.stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg: string; file?: string });
  t.ok(json.some((l) => l.level === 50 && l.file === file && l.msg.includes('/upstreams/0/serviceType')), 'the JSON log line is kept');
});
