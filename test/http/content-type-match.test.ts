// src/http/content-type-match.ts against type-is, the oracle (what negotiate.ts used until then):
// `contentTypeMatches(value, documented)` must be `typeis.is(value, documented) !== false` for every
// Content-Type value and every non-empty documented list, shorthands (`json`, mime-db's slow path)
// included. Documented types are given to both as written; the table's own normalization of them
// (routing/table.ts toTarget: parameters dropped, lowercased) is outside this comparison and tested
// last, through a compiled table.
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import t from 'tap';
import typeis from 'type-is';
import { contentTypeMatches, requestMediaType } from '../../src/http/content-type-match.js';
import { compile, entry } from '../helpers/routes.js';
import { untapped } from '../helpers/untapped.js';

const oracle = (value: string, documented: string[]): boolean => typeis.is(value, [...documented]) !== false;

// Pieces of media types: the common names (in odd case), and names media-typer refuses or content-type
// keeps as they are: wildcards, separators, whitespace inside, a non-ASCII letter that lowercases to
// ASCII (KELVIN SIGN -> k), one that lowercases to two characters, names too long (over 127).
const TYPES = ['application', 'text', 'multipart', 'image'];
const SUBTYPES = ['json', 'xml', 'plain', 'csv', 'html', 'form-data', 'x-www-form-urlencoded', 'octet-stream', 'hal+json', 'vnd.api+json', 'problem+json', 'svg+xml', 'a+b+json', 'j$o^n#s!&_'];
const ODD = [
  '*', '', 'x-custom', 'vnd.api', '*+json', '*+', 'json+', '+json', '.json', '-json', 'a.b.c', 'js on', 'json\u212a', '\u212aml',
  'x\u0130', 'x_y', 'x=y', 'x,y', 'x"y', 'x(y)', '9', 'a'.repeat(127), 'a'.repeat(128),
];
const inOddCase = (name: string) => fc.constantFrom(name, name.toUpperCase(), name[0]!.toUpperCase() + name.slice(1));
const pieceFrom = (common: string[]) =>
  fc.oneof(
    { weight: 12, arbitrary: fc.constantFrom(...common).chain(inOddCase) },
    { weight: 2, arbitrary: fc.constantFrom(...ODD) },
    { weight: 1, arbitrary: fc.string({ maxLength: 6 }) },
  );
const mediaType = fc.oneof(
  { weight: 8, arbitrary: fc.tuple(pieceFrom(TYPES), pieceFrom(SUBTYPES)).map(([type, subtype]) => `${type}/${subtype}`) },
  { weight: 1, arbitrary: pieceFrom([...TYPES, ...SUBTYPES]) }, // the subtype missing
  { weight: 1, arbitrary: fc.tuple(pieceFrom(TYPES), pieceFrom(SUBTYPES), pieceFrom(SUBTYPES)).map((parts) => parts.join('/')) },
);
const PARAMETERS = ['', ';', '; charset=utf-8', ';charset=UTF-8', '; charset="utf-8"', ';a=b;c=d', '; x="a;b"', '; q=0.5', ' ;', ';;', '; boundary=x/y'];
// SP and HTAB are trimmed, other whitespace is not.
const space = fc.oneof({ weight: 8, arbitrary: fc.constantFrom('', ' ', '  ', '\t', ' \t ') }, { weight: 1, arbitrary: fc.constantFrom('\n', '\r', '\u00a0', '\v') });
const contentType = fc.oneof(
  { weight: 8, arbitrary: fc.tuple(space, mediaType, space, fc.constantFrom(...PARAMETERS), space).map((parts) => parts.join('')) },
  { weight: 1, arbitrary: fc.string({ unit: fc.constantFrom('a', 'B', '/', '*', '+', ';', '=', '"', ' ', '\t', '.', '-', 'j', 's', 'o', 'n', '\u212a'), maxLength: 24 }) },
);

// Documented values: what documents hold (full types, wildcards, suffix forms, the shorthands type-is
// expands, some through mime-db, and mistakes), ranges over the common names, and raw generated types.
const DOCUMENTED = [
  'application/json', 'application/*', '*/*', '*/json', '*/*+json', 'application/*+json', 'application/*+xml', '*/*+xml',
  '+json', '+xml', '+', '+json/x', 'text/plain', 'text/*', 'multipart/form-data', 'multipart/*', 'application/x-www-form-urlencoded',
  'application/hal+json', 'Application/JSON', 'application/json; charset=utf-8', 'text/plain;charset=utf-8', ' application/json',
  'application/*+', '*+json', 'application/json/x', '*', '*/', '/json', '',
  'json', 'JSON', 'html', 'xml', 'txt', 'csv', 'png', 'bin', 'urlencoded', 'multipart', 'a.json', 'file.XML', '.json', 'json5', 'nope', 'text',
];
const range = fc
  .tuple(fc.constantFrom(...TYPES, '*'), fc.constantFrom(...SUBTYPES, '*', '*+json', '*+xml', '*+'))
  .map(([type, subtype]) => `${type}/${subtype}`);
const listed = fc.oneof({ weight: 3, arbitrary: fc.constantFrom(...DOCUMENTED) }, { weight: 3, arbitrary: range }, { weight: 1, arbitrary: mediaType });
const documented = fc.array(listed, { minLength: 1, maxLength: 4 });
/**
 * A request and a list that often holds the request's own type or a range over it (so that matches
 * are not rare): type/subtype as the request writes it (any case, whitespace), lowercased, with `*`
 * for either part, `*+suffix` for the subtype, or `+suffix`; or its subtype as a shorthand.
 */
const requestAndList = contentType.chain((value) => {
  const [type = '', subtype = ''] = value.split(';')[0]!.trim().split('/');
  const suffix = subtype.slice(subtype.lastIndexOf('+'));
  const near = fc.constantFrom(
    value.split(';')[0]!,
    `${type}/${subtype}`.toLowerCase(),
    `*/${subtype}`.toLowerCase(),
    `${type}/*`.toLowerCase(),
    `${type}/*${suffix}`.toLowerCase(),
    `*/*${suffix}`.toLowerCase(),
    suffix.toLowerCase(),
    subtype, // a shorthand: `json`, `html`, `csv`, as an extension mime-db may know
    `file.${subtype}`,
  );
  return fc.tuple(fc.constant(value), fc.array(fc.oneof({ weight: 2, arbitrary: listed }, { weight: 1, arbitrary: near }), { minLength: 1, maxLength: 4 }));
});

/** A documented value type-is expands through mime-db (content-type-match.ts's slow path). */
const throughMimeDb = (type: string): boolean => type !== '' && !type.includes('/') && type[0] !== '+' && type !== 'urlencoded' && type !== 'multipart';

t.test('property: the answer is type-is\'s for every Content-Type and documented list', async (t) => {
  let matched = 0;
  let matchedByShorthand = 0;
  fc.assert(
    fc.property(fc.oneof(fc.tuple(contentType, documented), requestAndList), ([value, types]) => {
      const expected = oracle(value, types);
      if (expected) matched++;
      const shorthands = types.filter(throughMimeDb);
      if (shorthands.length > 0 && oracle(value, shorthands)) matchedByShorthand++;
      return contentTypeMatches(value, types) === expected;
    }),
    { numRuns: 20_000 },
  );
  // So that the comparison is not mostly of "no" answers.
  t.ok(matched > 1500, `${matched} of the 20,000 cases match`);
  t.ok(matchedByShorthand > 30, `${matchedByShorthand} match by a shorthand expanded through mime-db`);
  // The request's media type itself, as type-is reports it with no list.
  fc.assert(
    fc.property(contentType, (value) => (requestMediaType(value) ?? false) === (value === '' ? false : typeis.is(value, []) || false)),
    { numRuns: 10_000 },
  );
});

t.test('examples', async (t) => {
  const yes: [string, string[]][] = [
    ['application/json', ['application/json']],
    ['Application/JSON; charset=utf-8', ['application/json']],
    [' \tapplication/json \t; charset=utf-8', ['text/plain', 'application/json']],
    ['application/vnd.api+json', ['application/*+json']],
    ['application/vnd.api+json', ['+json']],
    ['image/svg+xml', ['*/*+xml']],
    ['text/csv', ['text/*']],
    ['text/csv', ['*/*']],
    ['text/csv', ['*/csv']],
    ['application/x-www-form-urlencoded', ['urlencoded']],
    ['multipart/form-data; boundary=x', ['multipart']],
    ['application/json', ['json']],
    ['text/html', ['html']],
    ['application/json', ['a.json']],
    ['application/json\u212a', ['application/jsonk']],
  ];
  const no: [string, string[]][] = [
    ['application/json', ['application/xml']],
    ['application/json', ['Application/JSON']],
    ['application/json', ['application/json; charset=utf-8']],
    ['application', ['application/*']],
    ['application/', ['*/*']],
    ['application/json/x', ['*/*']],
    ['application/json x', ['*/*']],
    ['\napplication/json', ['*/*']],
    ['application/json\u00a0', ['*/*']],
    ['*/*', ['*/*']],
    ['application/json', ['+xml']],
    ['application/json', ['application/*+json']],
    ['application/json', ['nope']],
    ['application/json', ['']],
    ['application/json', []],
  ];
  for (const [value, types] of yes) {
    t.ok(contentTypeMatches(value, types), `${JSON.stringify(value)} is one of ${JSON.stringify(types)}`);
    t.ok(oracle(value, types), '(type-is agrees)');
  }
  for (const [value, types] of no) {
    t.notOk(contentTypeMatches(value, types), `${JSON.stringify(value)} is not one of ${JSON.stringify(types)}`);
    if (types.length > 0) t.notOk(oracle(value, types), '(type-is agrees)');
  }
});

t.test('type-is (and mime-db) are loaded only for a shorthand that needs them', async (t) => {
  // A fresh process: this one has loaded type-is as the oracle.
  const module = fileURLToPath(new URL('../../src/http/content-type-match.js', import.meta.url));
  const script = `
    import { createRequire } from 'node:module';
    const m = await import(${JSON.stringify(module)});
    const require = createRequire(import.meta.url);
    const loaded = () => ({ flag: m.shorthandsLoaded(), mimeDb: Object.keys(require.cache).some((file) => file.includes('mime-db')) });
    const steps = [];
    steps.push(['fast', m.contentTypeMatches('application/vnd.api+json', ['text/plain', 'application/*+json']), loaded()]);
    m.prepareShorthands(['application/json', '+json', 'urlencoded', 'multipart', '']);
    steps.push(['prepared without a shorthand', m.contentTypeMatches('multipart/mixed', ['urlencoded', 'multipart', '+json', '']), loaded()]);
    m.prepareShorthands(['application/json', 'json']);
    steps.push(['prepared with one', m.contentTypeMatches('application/json', ['json']), loaded()]);
    console.log(JSON.stringify(steps));
  `;
  const [command, args] = untapped(process.execPath, ['--input-type=module', '-e', script]);
  const steps = JSON.parse(execFileSync(command, args, { encoding: 'utf8' })) as unknown;
  t.same(steps, [
    ['fast', true, { flag: false, mimeDb: false }],
    ['prepared without a shorthand', true, { flag: false, mimeDb: false }],
    ['prepared with one', true, { flag: true, mimeDb: true }],
  ]);
});

t.test('the table drops a documented type\'s parameters and case first (outside the comparison with type-is)', async (t) => {
  // type-is compares a documented type as written: with parameters or capitals it matches nothing.
  t.notOk(oracle('text/plain', ['text/plain; charset=utf-8']), 'type-is alone: no match');
  t.notOk(oracle('application/json', ['Application/JSON']), 'type-is alone: no match');
  const U1 = 'http://127.0.0.1:9001';
  const U2 = 'http://127.0.0.1:9002';
  const table = compile([
    entry('POST', '/notes', U1, { consumes: ['text/plain; charset=utf-8'] }),
    entry('POST', '/notes', U2, { consumes: ['Application/JSON', 'JSON'] }),
  ]);
  const upstreams = (ct: string) => table.select('POST', '/notes', ct, undefined, true).targets.map((x) => x.upstream);
  t.same(upstreams('text/plain; charset=latin1'), [U1], 'a documented charset does not decide');
  t.same(upstreams('text/plain'), [U1]);
  t.same(upstreams('application/json'), [U2], 'capitals and a shorthand in a document');
  t.equal(table.select('POST', '/notes', 'text/html', undefined, true).status, 415);
});
