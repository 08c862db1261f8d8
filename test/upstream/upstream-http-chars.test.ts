// isToken and isFieldValue (src/upstream/http-chars.ts), the string forms of the parser's byte tables,
// against the RFC 9110 grammar written as regular expressions, on random strings of Latin-1 and beyond.
import fc from 'fast-check';
import t from 'tap';
import { isFieldValue, isToken } from '../../src/upstream/http-chars.js';

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const text = fc.string({ unit: fc.integer({ min: 0, max: 0x17f }).map((c) => String.fromCharCode(c)), maxLength: 20 });

t.test('isToken is the token rule', async (t) => {
  fc.assert(fc.property(text, (s) => isToken(s) === TOKEN.test(s)), { numRuns: 2000 });
  t.ok(isToken('chat.v1') && isToken('M-SEARCH') && !isToken('') && !isToken('a b') && !isToken('a,b'));
});

t.test('isFieldValue is the field-value rule (no CR, LF, NUL or other control; nothing past Latin-1)', async (t) => {
  fc.assert(fc.property(text, (s) => isFieldValue(s) === FIELD_VALUE.test(s)), { numRuns: 2000 });
  t.ok(isFieldValue('') && isFieldValue('a\tb c\xe9') && !isFieldValue('a\r\nb') && !isFieldValue('\x01') && !isFieldValue('\x7f') && !isFieldValue('\u0100'));
});
