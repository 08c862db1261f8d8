/**
 * A request's Transfer-Encoding: which lists the gateway forwards as chunked, which it refuses as
 * ambiguous framing (400) and which as codings it does not decode (501). Named cases, and random
 * header texts built from a list of codings compared with the verdict read off that list.
 */
import fc from 'fast-check';
import t from 'tap';
import { readTransferCoding, TransferCoding } from '../../src/http/transfer-coding.js';

t.test('named cases', async (t) => {
  const cases: Array<[string, TransferCoding]> = [
    ['chunked', TransferCoding.Chunked],
    ['Chunked', TransferCoding.Chunked],
    ['CHUNKED', TransferCoding.Chunked],
    [' chunked\t', TransferCoding.Chunked],
    ['chunked, ', TransferCoding.Chunked],
    [', ,chunked', TransferCoding.Chunked],
    ['gzip, chunked', TransferCoding.Unsupported],
    ['deflate,chunked', TransferCoding.Unsupported],
    ['x-custom, gzip, chunked', TransferCoding.Unsupported],
    // RFC 9112 6.3: chunked not last in a request is a 400 and a closed connection.
    ['gzip', TransferCoding.Ambiguous],
    ['identity', TransferCoding.Ambiguous],
    ['chunked, gzip', TransferCoding.Ambiguous],
    ['chunked, identity', TransferCoding.Ambiguous],
    // RFC 9112 7: chunked is applied once.
    ['chunked, chunked', TransferCoding.Ambiguous],
    ['chunked, gzip, chunked', TransferCoding.Ambiguous],
    ['', TransferCoding.Ambiguous],
    [' , ', TransferCoding.Ambiguous],
    // Not the token "chunked": a parameter, a near miss, other whitespace.
    ['chunked;q=1', TransferCoding.Ambiguous],
    ['xchunked', TransferCoding.Ambiguous],
    ['chunked\v', TransferCoding.Ambiguous],
    ['chunk ed', TransferCoding.Ambiguous],
  ];
  for (const [value, expected] of cases) t.equal(readTransferCoding(value), expected, JSON.stringify(value));
});

t.test('random lists: the verdict follows the list of codings', async () => {
  const coding = fc.constantFrom('chunked', 'gzip', 'deflate', 'identity', 'compress', 'x-a', '');
  const ows = fc.constantFrom('', ' ', '\t', '  ');
  const element = fc.record({ coding, before: ows, after: ows, upper: fc.array(fc.boolean(), { maxLength: 8 }) });
  fc.assert(
    fc.property(fc.array(element, { minLength: 1, maxLength: 5 }), (elements) => {
      const text = elements
        .map(({ coding, before, after, upper }) => before + [...coding].map((c, i) => (upper[i] ? c.toUpperCase() : c)).join('') + after)
        .join(',');
      const list = elements.map((e) => e.coding).filter((c) => c !== '');
      const chunkedCount = list.filter((c) => c === 'chunked').length;
      const expected =
        list.length === 0 || list[list.length - 1] !== 'chunked' || chunkedCount > 1
          ? TransferCoding.Ambiguous
          : list.length === 1
            ? TransferCoding.Chunked
            : TransferCoding.Unsupported;
      return readTransferCoding(text) === expected;
    }),
    { numRuns: 2000 },
  );
});
