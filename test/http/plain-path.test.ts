/**
 * The accept phase's one-pass check of a plain path (isPlainPath, src/http/normalize-path.ts) must give
 * what the checks one by one give: the same normalized path or the same refusal, for plain paths and
 * for every other kind (dot-segments, escapes, backslashes, fragments, bytes outside visible ASCII).
 */
import fc from 'fast-check';
import t from 'tap';
import { AcceptPhase, type Refusal } from '../../src/lifecycle/accept.js';
import { isPlainPath, normalizePath } from '../../src/http/normalize-path.js';
import { hasSlashLookalike, isTargetText } from '../../src/http/request-target.js';
import { testConfig } from '../helpers/upstream-server.js';

const keep = new AcceptPhase(testConfig({ encodedSlashes: 'keep' }), '1.1 test');
const reject = new AcceptPhase(testConfig({ encodedSlashes: 'reject' }), '1.1 test');

/** The checks of AcceptPhase.routedPath one by one, as they were before the one-pass check: status, or the path. */
function oneByOne(url: string, query: string, rejectEncodedSlashes: boolean): number | string {
  if (!isTargetText(url) || !isTargetText(query)) return 400;
  if (rejectEncodedSlashes && hasSlashLookalike(url)) return 400;
  return normalizePath(url) ?? 400;
}

function outcome(result: Refusal | string): number | string {
  return typeof result === 'string' ? result : result.answer.status;
}

t.test('named cases', async (t) => {
  for (const plain of ['/', '/a', '/a/', '//', '/a//b/', '/a.b/c.', "/!$&'()*+,;=:@-_~", '/github-com-rest/repos/octocat/hello-world/issues/1347']) {
    t.ok(isPlainPath(plain), `${JSON.stringify(plain)} is plain`);
  }
  for (const other of ['', 'a', '/.', '/..', '/a/.', '/a/../b', '/.well-known/x', '/a%20b', '/a%2Fb', '/a\\b', '/a#b', '/a b', '/caf\u00e9', '/a\u007f', ...'"<>[]^`{|}'.split('').map((c) => `/a${c}b`)]) {
    t.notOk(isPlainPath(other), `${JSON.stringify(other)} is not plain`);
  }
  t.equal(keep.routedPath('/a/b/', ''), '/a/b', 'a plain path loses its trailing slash');
  t.equal(keep.routedPath('/a/b//', ''), '/a/b', 'every one of them');
  t.equal(keep.routedPath('/.well-known/x', ''), '/.well-known/x', 'a segment starting with a dot that is not a dot-segment');
  t.equal(keep.routedPath('/a/./b/../c', ''), '/a/c', 'dot-segments are resolved by the checks one by one');
  t.equal(outcome(keep.routedPath('/a/b', 'x#y')), 400, 'a plain path with a fragment in the query is refused');
  // A character a URI path may hold only escaped is written escaped: no longer plain, as it once was.
  t.equal(keep.routedPath('/q"uote/1/', ''), '/q%22uote/1', 'a raw quote is escaped');
  t.equal(keep.routedPath('/a<b>/[c]^`{|}', ''), '/a%3Cb%3E/%5Bc%5D%5E%60%7B%7C%7D', 'and the rest of them');
  t.equal(keep.routedPath('/q%22uote/%3c', ''), '/q%22uote/%3C', 'as their escapes are');
});

t.test('random targets: the same path or the same refusal as the checks one by one', async () => {
  const char = fc.constantFrom('/', '/', 'a', '.', '.', '%', '2', 'f', 'F', '5', 'c', '\\', '#', ' ', '~', '\u00e9', '\u007f', '?', '"', '<', '[', '|', '}');
  const text = fc.array(char, { maxLength: 14 }).map((chars) => chars.join(''));
  const path = text.map((s) => `/${s}`);
  fc.assert(
    fc.property(fc.oneof(path, text), fc.oneof(fc.constant(''), text), (url, query) => {
      return (
        outcome(keep.routedPath(url, query)) === oneByOne(url, query, false) &&
        outcome(reject.routedPath(url, query)) === oneByOne(url, query, true)
      );
    }),
    { numRuns: 5000 },
  );
});
