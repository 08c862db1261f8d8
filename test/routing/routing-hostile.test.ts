import fc from 'fast-check';
import t from 'tap';
import { normalizePath } from '../../src/http/normalize-path.js';
import { RoutingTable } from '../../src/routing/table.js';
import { compile, entry, oracleFor, winner } from '../helpers/routes.js';

/** Best of a few runs: a one-off stall of this shared machine must not fail the test. */
function fastestMs(fn: () => void, runs = 5): number {
  let best = Infinity;
  for (let i = 0; i < runs; i++) {
    const start = process.hrtime.bigint();
    fn();
    best = Math.min(best, Number(process.hrtime.bigint() - start) / 1e6);
  }
  return best;
}

const PATHOLOGICAL_TEMPLATES = ['/{+a}/{+b}/{+c}/x', '/{a}/{+b}/{c}/{+d}/y', '/{+a}/{b}/{+c}/{d}/{+e}/z', '/{+a}{.b}{c}/w'];

t.test('an 8 KB path of 1,000 segments against nested catch-alls answers fast and polynomially', async (t) => {
  const table = compile(PATHOLOGICAL_TEMPLATES.map((p) => entry('GET', p)));
  const segments = Array.from({ length: 1000 }, (_, i) => 'abcdefghijklm'.slice(0, 1 + (i % 13)));
  const miss = '/' + segments.join('/');
  const hit = miss + '/x';
  t.ok(miss.length > 7800 && miss.length <= 8192, `path is ${miss.length} bytes`);
  for (const [name, path, expected] of [['miss', miss, null], ['hit', hit, '/{+a}/{+b}/{+c}/x']] as const) {
    let got: string | null = 'unset';
    const ms = fastestMs(() => {
      got = winner(table, path);
    });
    t.equal(got, expected, `${name}: ${expected ?? 'no match'}`);
    // The deterministic guarantee is the work count below (linear in the path). The time is only a
    // generous backstop, best of 5 runs: about 10 ms here (the figure is 50 ms), while a cubic
    // walk over 1,000 segments takes seconds, so a busy machine cannot flip it and a blow-up still does.
    t.ok(ms < 500, `${name}: answered in ${ms.toFixed(2)} ms (< 500 ms)`);
    const { visits } = table.lastLookupWork();
    t.ok(visits < 5 * path.length, `${name}: ${visits} node visits for ${path.length} characters (linear, not cubic)`);
    t.equal(table.lastLookupWork().regexChars, 0, `${name}: no regex work (these templates have none)`);
  }
  const oracle = oracleFor(PATHOLOGICAL_TEMPLATES.map((p) => entry('GET', p)));
  t.equal(oracle.lookup('GET', hit).template?.raw, '/{+a}/{+b}/{+c}/x', 'the oracle agrees on the hit');
});

t.test('a slash-spanning regex between catch-alls: bounded work, then 400 instead of a stall', async (t) => {
  const table = compile([entry('GET', '/{+a}/{x: .+}/{+c}/q'), entry('GET', '/{+a}/{x: [a-z]+/[a-z]+}/{+c}/r')]);
  const path = '/' + Array.from({ length: 1000 }, (_, i) => 'abcdefghijklm'.slice(0, 1 + (i % 13))).join('/');
  const status = table.select('GET', path, undefined, undefined, false).status;
  t.equal(status, 400, 'the lookup gives up: "path too complex to route"');
  const work = table.lastLookupWork();
  t.ok(work.regexChars <= 150_000 + path.length, `regex work is bounded: ${work.regexChars} characters`);
  t.ok(work.visits <= 200_000, `node visits are bounded: ${work.visits}`);
  t.equal(winner(table, '/a/b/c/d/q'), '/{+a}/{x: .+}/{+c}/q', 'ordinary paths still route');
  t.equal(winner(table, '/a/bc/de/f/r'), '/{+a}/{x: [a-z]+/[a-z]+}/{+c}/r');
});

t.test('catastrophic-backtracking regexes run on the linear-time engine', async (t) => {
  const table = compile([entry('GET', '/r/{x: (a+)+}'), entry('GET', '/r/{y: (a|aa)*c}'), entry('GET', '/s/{z: (.*)*b}/{+rest}')]);
  // The linear engine's time grows with the input, not exponentially: compare a hostile input with a
  // benign one of the same length, measured in this run (a backtracking engine would take years).
  const evil = '/r/' + 'a'.repeat(5000) + '!';
  const benign = '/r/' + 'a'.repeat(5000) + 'c';
  t.equal(winner(table, evil), null);
  const evilMs = fastestMs(() => winner(table, evil));
  const benignMs = fastestMs(() => winner(table, benign));
  t.ok(evilMs < 10 * benignMs + 5, `(a+)+ against 5,000 a's and a "!": ${evilMs.toFixed(2)} ms, benign input ${benignMs.toFixed(2)} ms`);
  const spanning = '/s/' + 'a/'.repeat(1500) + 'c';
  t.equal(winner(table, spanning), null);
  const work = table.lastLookupWork();
  t.ok(work.regexChars <= 150_000 + spanning.length, `(.*)*b spanning 1,500 segments: regex work bounded (${work.regexChars} characters)`);
  t.equal(winner(table, '/r/aaaa'), '/r/{x: (a+)+}', 'and they still match what they should');
});

t.test('constructs the linear engine cannot run are refused, naming upstream and template', async (t) => {
  const { problems } = RoutingTable.compile([entry('GET', '/x/{a: (\\w)\\1+}', 'http://evil:1'), entry('GET', '/x/{a: (?<=a)b}', 'http://evil:1')]);
  t.equal(problems.length, 2);
  t.equal(problems[0]!.message, 'upstream http://evil:1: template "/x/{a: (\\w)\\1+}" (GET): "{a: (\\w)\\1+}": regex uses a backreference, which is not allowed in a template');
  t.match(problems[1]!.message, /lookaround/);
});

t.test('paths that must be refused with 400', async (t) => {
  for (const bad of ['/a/%zz', '/a/%2', '/a%', '/..', '/a/../..', '/a/%2E%2E/%2e%2e', 'relative', '', '/./../x']) {
    t.equal(normalizePath(bad), null, `${JSON.stringify(bad)} is refused`);
  }
});

t.test('normalization: dot-segments, unreserved escapes, %2F kept, trailing slashes dropped', async (t) => {
  const cases: Array<[string, string]> = [
    ['/', '/'],
    ['/a/b/', '/a/b'],
    ['/a//', '/a'],
    ['/a///', '/a'],
    ['//', '/'],
    ['/a/./b/../c', '/a/c'],
    ['/a/b/..', '/a'],
    ['/a/.', '/a'],
    ['/%7Euser/%41%62c', '/~user/Abc'],
    ['/a%2fb/c', '/a%2Fb/c'],
    ['/a%2Fb%20c', '/a%2Fb%20c'],
    ['/a/%2E%2E/b', '/b'],
    ['/a/.hidden/..x', '/a/.hidden/..x'],
    ['/files/v1.2/x', '/files/v1.2/x'],
    ['/q"uote/{x}|[y]^`<z>', '/q%22uote/%7Bx%7D%7C%5By%5D%5E%60%3Cz%3E'],
    ['/q%22uote/%7b%7C', '/q%22uote/%7B%7C'],
    ['/a"/../b"', '/b%22'],
  ];
  for (const [raw, want] of cases) t.equal(normalizePath(raw), want, `${raw} -> ${want}`);
});

t.test('normalization is stable and never leaves a dot-segment (property)', async (t) => {
  const chunk = fc.constantFrom('a', 'b', '.', '..', '%2E', '%2e%2E', '%41', '%2F', '%7e', '', 'x.y', '"', '<>', '%22', '{|}', '%7b');
  fc.assert(
    fc.property(fc.array(chunk, { maxLength: 8 }), fc.boolean(), (parts, trailing) => {
      const raw = '/' + parts.join('/') + (trailing ? '/' : '');
      const once = normalizePath(raw);
      if (once === null) return;
      // A second pass changes nothing, and no trailing slash is left (the router would read it as absent).
      const twice = normalizePath(once);
      if (twice !== once) throw new Error(`${raw}: ${once} then ${twice}`);
      if (once.length > 1 && once.endsWith('/')) throw new Error(`${raw}: ${once} keeps a trailing slash`);
      if (once.split('/').some((s) => s === '.' || s === '..')) throw new Error(`${raw}: ${once} keeps a dot-segment`);
    }),
    { numRuns: 3000 },
  );
  t.pass('3,000 random paths');
});
