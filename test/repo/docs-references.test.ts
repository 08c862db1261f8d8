// Every reference a reader meets in the repository can be followed with the repository alone: no file
// cites a document that lives elsewhere (a numbered section of an outside text, a tracker issue, a
// sibling directory), and every pointer into docs/ names a file and a heading that exist.
import t from 'tap';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const SCANNED = ['src', 'test', 'bench', 'config', 'examples', 'docs'];
const TEXT = /\.(ts|js|mjs|cjs|md|json|jsonc|ya?ml|sh)$/;

/**
 * Files that still cite outside documents, each with why. Empty this list as they are fixed; a file
 * listed here that no longer cites anything fails the test, so the list cannot go stale.
 */
const PENDING = new Map<string, string>([
]);

const OUTSIDE: readonly [RegExp, string][] = [
  [/\bcontract(?:'s)? (?:sections? )?\d/i, 'cites a numbered section of an outside contract'],
  [/\bissue #?\d/i, 'cites a tracker issue'],
  [/\.\.\/shared\b/, 'points into ../shared'],
  [/gateway-contract/i, 'names the outside contract file'],
];

function walk(dir: string, out: string[]): string[] {
  for (const name of readdirSync(dir)) {
    if (name === 'node_modules' || name === 'dist' || name.startsWith('.')) continue;
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path, out);
    else if (TEXT.test(name)) out.push(path);
  }
  return out;
}

const files = SCANNED.flatMap((dir) => {
  try {
    return walk(join(root, dir), []);
  } catch {
    return [];
  }
}).map((path) => relative(root, path).split('\\').join('/'));

/** GitHub's heading anchors: lower-cased, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchorsOf(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (heading === null) continue;
    const base = heading[1]!
      .toLowerCase()
      .replace(/`/g, '')
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

const anchorCache = new Map<string, Set<string> | null>();
function anchorsOfFile(path: string): Set<string> | null {
  if (!anchorCache.has(path)) {
    let anchors: Set<string> | null;
    try {
      anchors = anchorsOf(readFileSync(join(root, path), 'utf8'));
    } catch {
      anchors = null;
    }
    anchorCache.set(path, anchors);
  }
  return anchorCache.get(path)!;
}

/** Problems of one reference to `target` (repository-relative), `anchor` possibly empty. */
function checkTarget(target: string, anchor: string): string | null {
  const anchors = anchorsOfFile(target);
  if (anchors === null) return `${target} does not exist`;
  if (anchor !== '' && !anchors.has(anchor)) return `${target} has no heading #${anchor}`;
  return null;
}

t.test('the reference exists and has an index', async (t) => {
  t.ok(files.includes('docs/reference/README.md'), 'docs/reference/README.md');
  const index = readFileSync(join(root, 'docs/reference/README.md'), 'utf8');
  for (const file of files.filter((f) => f.startsWith('docs/reference/') && f !== 'docs/reference/README.md')) {
    t.ok(index.includes(`(${file.slice('docs/reference/'.length)})`), `the index links ${file}`);
  }
});

t.test('no file cites a document outside the repository', async (t) => {
  const offenders: string[] = [];
  const stillCiting = new Set<string>();
  for (const file of files) {
    if (file === 'test/repo/docs-references.test.ts') continue;
    const lines = readFileSync(join(root, file), 'utf8').split('\n');
    lines.forEach((line, i) => {
      for (const [pattern, why] of OUTSIDE) {
        if (!pattern.test(line)) continue;
        if (PENDING.has(file)) stillCiting.add(file);
        else offenders.push(`${file}:${i + 1}: ${why}: ${line.trim()}`);
      }
    });
  }
  t.same(offenders, [], 'every reference points into the repository (docs/reference/...)');
  for (const file of PENDING.keys()) {
    t.ok(stillCiting.has(file), `${file} is listed as pending and still cites outside (remove it from PENDING once fixed)`);
  }
});

t.test('every pointer into docs/ names a file and heading that exist', async (t) => {
  const broken: string[] = [];
  const mention = /\bdocs\/([\w./-]+\.md)(?:#([\w-]+))?/g;
  for (const file of files) {
    const text = readFileSync(join(root, file), 'utf8');
    for (const match of text.matchAll(mention)) {
      const problem = checkTarget(`docs/${match[1]!}`, match[2] ?? '');
      if (problem !== null) broken.push(`${file}: ${match[0]}: ${problem}`);
    }
  }
  t.same(broken, [], 'docs/... mentions resolve');
});

t.test('relative links between the docs resolve', async (t) => {
  const broken: string[] = [];
  const link = /\]\(([^)\s]+?)\)/g;
  for (const file of files.filter((f) => f.startsWith('docs/') && f.endsWith('.md'))) {
    const text = readFileSync(join(root, file), 'utf8');
    for (const match of text.matchAll(link)) {
      const href = match[1]!;
      if (/^[a-z]+:/i.test(href)) continue;
      const [path = '', anchor = ''] = href.split('#');
      const target = path === '' ? file : relative(root, resolve(root, dirname(file), path)).split('\\').join('/');
      const problem = checkTarget(target, anchor);
      if (problem !== null) broken.push(`${file}: (${href}): ${problem}`);
    }
  }
  t.same(broken, [], 'links resolve');
});
