// Every Node.js process a test starts goes through untapped() (test/helpers/untapped.ts): without it
// tap's coverage loader rides along in the child's NODE_OPTIONS and doubles what a gateway start costs,
// which the suite's time on two cores (README) cannot afford. This finds spawns that bypass it.
import { readFileSync } from 'node:fs';
import module from 'node:module';
import { join, relative } from 'node:path';
import t from 'tap';
import { REPO_ROOT as root, typeScriptFiles } from '../helpers/repo-files.js';
import type { SkippedTapLoader } from '../helpers/skip-tap-loader.js';
import { untapped } from '../helpers/untapped.js';

/** A child_process call whose command is node itself or npm (a Node.js program), not built by untapped(). */
const DIRECT = /\b(?:spawn|spawnSync|execFile|execFileSync|fork)\(\s*(?:process\.execPath|'npm'|'node')/g;

t.test('tests start Node.js processes through untapped()', async (t) => {
  const offenders: string[] = [];
  const self = join(root, 'test', 'repo', 'test-children.test.ts');
  for (const path of typeScriptFiles(join(root, 'test')).filter((path) => path !== self)) {
    const text = readFileSync(path, 'utf8');
    for (const match of text.matchAll(DIRECT)) {
      const line = text.slice(0, match.index).split('\n').length;
      offenders.push(`${relative(root, path)}:${line}: ${match[0]}`);
    }
  }
  t.same(offenders, [], 'each of these should be spawn(...untapped(command, args), options)');
});

t.test('the check finds a direct spawn', async (t) => {
  const direct = new RegExp(DIRECT.source);
  t.match("const child = spawn(process.execPath, [MAIN, 'start']);", direct);
  t.match("spawnSync('npm', ['start'])", direct);
  t.notMatch("spawn(...untapped(process.execPath, [MAIN, 'start']), {})", direct);
});

// The test process itself runs without tap's loader thread (test/helpers/skip-tap-loader.ts, preloaded
// through package.json's "tap" "test-env"), and its children lose the preload with tap's option.
t.test("tap's loader is not registered in test processes, and children get neither option", async (t) => {
  const state = (globalThis as Record<symbol, unknown>)[Symbol.for('specgate.skippedTapLoader')] as SkippedTapLoader | undefined;
  t.ok(state, 'test/helpers/skip-tap-loader.ts was preloaded');
  // processinfo registers its loader with module.register() unless Node has working synchronous hooks.
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  const syncHooks = typeof (module as { registerHooks?: unknown }).registerHooks === 'function' && (major > 25 || (major === 25 && minor >= 1) || (major === 24 && minor >= 13));
  if (!syncHooks) t.equal(state?.refused, 1, "processinfo's one module.register() was refused");
  const tapOption = '"--import=file:///x/node_modules/@tapjs/processinfo/dist/esm/import.mjs"';
  const [, args] = untapped('node', ['-v'], { NODE_OPTIONS: `--import=./dist/test/helpers/skip-tap-loader.js ${tapOption}` });
  t.same(args, ['-u', 'NODE_OPTIONS', 'node', '-v'], 'both removed');
  const [, kept] = untapped('node', ['-v'], { NODE_OPTIONS: `--max-old-space-size=512 --import=./dist/test/helpers/skip-tap-loader.js ${tapOption}` });
  t.same(kept, ['NODE_OPTIONS=--max-old-space-size=512', 'node', '-v'], "the user's own options stay");
});

// tap computes the test processes' command line (a loader per plugin) before it rebuilds itself for a
// changed plugin list, so the first run after `npm ci` would load the TypeScript and mock plugins
// package.json turns off (a loader thread each, and tsimp), as every fresh-clone CI run did until
// `npm ci` built the list (package.json "prepare": `tap build`).
t.test('test files run with the plugin list package.json gives, not the default one', async (t) => {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { tap: { plugin: string[] } };
  const off = pkg.tap.plugin.filter((plugin) => plugin.startsWith('!')).map((plugin) => plugin.slice(1));
  t.ok(off.includes('@tapjs/typescript'), 'the TypeScript plugin is off (the tests run compiled)');
  const loaded = process.execArgv.filter((arg) => off.some((plugin) => arg.includes(`/${plugin}/`)));
  t.same(loaded, [], "no loader of a plugin that is off (after changing the list: `npx tap build`)");
});
