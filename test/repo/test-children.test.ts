// Every Node.js process a test starts goes through untapped() (test/helpers/untapped.ts): without it
// tap's coverage loader rides along in the child's NODE_OPTIONS and doubles what a gateway start costs,
// which the suite's time on two cores (README) cannot afford. This finds spawns that bypass it.
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import t from 'tap';
import { REPO_ROOT as root, typeScriptFiles } from '../helpers/repo-files.js';

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
