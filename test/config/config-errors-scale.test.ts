// A config with a great many problems is refused quickly, with a message of bounded size: 20,000
// unknown keys took 100 s to describe (each error serialized the whole object holding its key), and a
// reload blocked the primary that long.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ConfigError, MAX_LISTED_PROBLEMS, parseConfig } from '../../src/config/load.js';
import { gateway } from '../helpers/cli.js';

const KEYS = 20_000;
const configText = (keys: number): string => {
  const config: Record<string, unknown> = { port: 0 };
  for (let i = 0; i < keys; i++) config[`k${i}`] = i;
  return JSON.stringify(config);
};
const text = configText(KEYS);

/** The error parseConfig throws for `source`, and the fastest of three runs' milliseconds. */
function refused(source: string): { error: unknown; ms: number } {
  let error: unknown;
  let ms = Infinity;
  for (let run = 0; run < 3; run++) {
    const started = performance.now();
    try {
      parseConfig(source, 'big.json');
    } catch (err) {
      error = err;
    }
    ms = Math.min(ms, performance.now() - started);
  }
  return { error, ms };
}

t.test(`${KEYS} unknown keys are described in time linear in their number`, async (t) => {
  // A ratio against a tenth of the keys in the same run, not a time: this host's load moves times
  // several-fold. Linear work reads about 10x; the quadratic description this guards against, 100x.
  const small = refused(configText(KEYS / 10));
  const { error, ms } = refused(text);
  t.ok(error instanceof ConfigError);
  t.ok(ms < 30 * Math.max(small.ms, 5), `${KEYS} keys took ${Math.round(ms)} ms, ${KEYS / 10} keys ${Math.round(small.ms)} ms`);
  const problems = (error as ConfigError).problems;
  t.equal(problems.length, KEYS, 'every unknown key is a problem');
  const lines = (error as ConfigError).message.split('\n');
  t.equal(lines.length, MAX_LISTED_PROBLEMS + 1, `the first ${MAX_LISTED_PROBLEMS} are listed, then a count`);
  t.equal(lines[0], 'big.json: /k0: unknown key "k0"; known keys here: ' + lines[0]!.split('known keys here: ')[1]);
  t.equal(lines.at(-1), `big.json: and ${KEYS - MAX_LISTED_PROBLEMS} more problems`);
});

t.test('a huge value is shown shortened, and not serialized whole', async (t) => {
  const huge = { port: { nested: 'x'.repeat(5_000_000), list: Array.from({ length: 100_000 }, (_, i) => i) } };
  const started = performance.now();
  let message = '';
  try {
    parseConfig(JSON.stringify(huge), 'huge.json');
  } catch (err) {
    message = (err as Error).message;
  }
  t.ok(performance.now() - started < 3000);
  t.equal(message, `huge.json: /port: must be an integer (got {"nested":"${'x'.repeat(46)}...)`);
});

t.test('gateway check lists the first problems and counts them all', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-scale-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'gateway.json');
  writeFileSync(file, text);
  const { code, stderr } = await gateway('check', '--config', file);
  t.equal(code, 1);
  const lines = stderr.trim().split('\n');
  t.equal(lines.length, MAX_LISTED_PROBLEMS + 2);
  t.match(lines[0], `error: ${file}: /k0: unknown key "k0"`);
  t.equal(lines.at(-2), `error: ${file}: and ${KEYS - MAX_LISTED_PROBLEMS} more problems`);
  t.equal(lines.at(-1), `gateway check: ${file} has ${KEYS} problem(s)`);
});

t.test('a config nested 100,000 levels deep is refused with the file named, by check and by start', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-deep-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const reason = 'the config nests too deeply to be read (objects or arrays inside one another, hundreds of levels; Maximum call stack size exceeded)';
  for (const [name, value] of [
    ['arrays', `${'['.repeat(100_000)}${']'.repeat(100_000)}`],
    ['objects', `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`],
  ] as const) {
    const file = join(dir, `${name}.json`);
    writeFileSync(file, `{"port":0,"x":${value}}`);
    const check = await gateway('check', '--config', file);
    t.equal(check.code, 1, name);
    t.equal(check.stderr, `error: ${file}: ${reason}\ngateway check: ${file} has 1 problem(s)\n`, `${name}: no stack trace`);
    const start = await gateway('start', '--config', file);
    t.equal(start.code, 1);
    t.match(start.stderr, `gateway start: ${file}: ${reason}`);
    t.notMatch(start.stderr, /\n\s+at /, 'no stack trace');
  }
});
