/**
 * What a request target may hold, and which paths hide a segment boundary an upstream could see:
 * named cases, and random strings compared with the rules written as regular expressions.
 */
import fc from 'fast-check';
import t from 'tap';
import { hasSlashLookalike, isTargetText } from '../../src/http/request-target.js';

const TARGET_TEXT = /^[\x21-\x22\x24-\x7e]*$/;
const SLASH_LOOKALIKE = /\\|%2f|%5c/i;

t.test('named cases', async (t) => {
  for (const ok of ['/users/7', '/a/b?c=d', '/%20', '/a;b=c', "/!$&'()*+,;=:@-._~", '']) t.ok(isTargetText(ok), JSON.stringify(ok));
  for (const bad of ['/users/7#x', '#', '/a b', '/caf\u00e9', '/a\u0000', '/a\u007f', '/a\t']) t.notOk(isTargetText(bad), JSON.stringify(bad));
  for (const hides of ['/a\\b', '/a%2fb', '/a%2Fb', '/a%5cb', '/a%5C', '\\']) t.ok(hasSlashLookalike(hides), JSON.stringify(hides));
  for (const plain of ['/a/b', '/a%2eb', '/a%25%32f', '/a%2', '/a%', '/%5', '/a%20b']) t.notOk(hasSlashLookalike(plain), JSON.stringify(plain));
});

t.test('random strings agree with the rules as regular expressions', async () => {
  const char = fc.constantFrom('a', '/', '%', '2', 'f', 'F', '5', 'c', 'C', '\\', '#', ' ', '\u00e9', '~', '\u007f');
  const text = fc.array(char, { maxLength: 12 }).map((chars) => chars.join(''));
  fc.assert(
    fc.property(text, (s) => isTargetText(s) === TARGET_TEXT.test(s) && hasSlashLookalike(s) === SLASH_LOOKALIKE.test(s)),
    { numRuns: 3000 },
  );
});
