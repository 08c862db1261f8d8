import fc from 'fast-check';
import Negotiator from 'negotiator';
import t from 'tap';
import { Builtins } from '../../src/builtins/index.js';
import { acceptedMediaTypes } from '../../src/http/accept-media-types.js';
import { compile, entry } from '../helpers/routes.js';

const negotiated = (accept: string | undefined, offers: string[]): string[] => new Negotiator({ headers: { accept } }).mediaTypes(offers);

t.test('a charset on Accept does not refuse a type without a charset notion', async (t) => {
  for (const accept of ['application/json; charset=utf-8', 'application/json;charset=UTF-8', 'application/*; charset=latin1']) {
    t.same(acceptedMediaTypes(accept, ['application/json']), ['application/json'], accept);
  }
  t.same(acceptedMediaTypes('text/plain; charset=utf-8', ['text/plain']), ['text/plain']);
  t.same(acceptedMediaTypes('text/plain; charset=UTF-8', ['text/plain; charset=utf-8']), ['text/plain; charset=utf-8'], 'same charset, case-insensitively');
  t.same(acceptedMediaTypes('text/plain; charset=latin1', ['text/plain; charset=utf-8']), [], 'another charset than the offer has refuses');
  t.same(acceptedMediaTypes('application/json; charset=utf-8; q=0, */*', ['application/json', 'text/csv']), ['text/csv'], 'q=0 still refuses');
  t.same(acceptedMediaTypes('text/plain; version=0.0.4; charset=utf-8', ['text/plain', 'text/plain;version=0.0.4']), ['text/plain;version=0.0.4'], 'other parameters are still required');
});

t.test('routing: an endpoint producing application/json serves Accept with a charset', async (t) => {
  const table = compile([entry('GET', '/report', 'http://127.0.0.1:9001', { produces: ['application/json'] })]);
  for (const accept of ['application/json; charset=utf-8', 'application/json;charset=UTF-8']) {
    t.equal(table.select('GET', '/report', undefined, accept, false).status, 200, accept);
  }
  t.equal(table.select('GET', '/report', undefined, 'text/plain; charset=utf-8', false).status, 406);
});

t.test('/metrics: Accept with a charset picks the format it names', async (t) => {
  const builtins = new Builtins({ paths: { healthcheck: '/healthcheck', metrics: '/metrics', spec: '/spec' }, metrics: { enabled: true } });
  builtins.setMetrics('{"requests":{}}', '# metrics\n');
  const get = (accept: string) => builtins.handle('GET', '/metrics', '', { accept })!;
  for (const accept of ['application/json; charset=utf-8', 'application/json;charset=UTF-8']) {
    const res = await get(accept);
    t.equal(res.status, 200, accept);
    t.match(res.headers['content-type'], /^application\/json/);
  }
  const text = await get('text/plain; charset=utf-8');
  t.equal(text.status, 200);
  t.match(text.headers['content-type'], /^text\/plain/);
  t.equal((await get('image/png')).status, 406);
});

// Headers built from pieces, so that the reference can drop the charset parameters exactly.
const TYPES = ['*/*', 'application/*', 'application/json', 'text/*', 'text/plain', 'TEXT/Plain', 'text/csv', 'image/png', 'bad', ''];
const CHARSETS = ['utf-8', 'UTF-8', 'latin1', '*', '"utf-8"'];
const OTHER_PARAMS = ['version=0.0.4', 'version=1', 'level=1', 'q=0', 'q=0.5', 'q=1', 'q=abc', 'x="a,b"', 'flag', ''];
interface Range {
  type: string;
  params: { name: string; text: string }[];
}
const otherParam = fc.constantFrom(...OTHER_PARAMS).map((text) => ({ name: text.split('=')[0]!, text }));
const charsetParam = fc.record({ name: fc.constantFrom('charset', 'Charset'), value: fc.constantFrom(...CHARSETS) }).map(({ name, value }) => ({ name: 'charset', text: `${name}=${value}` }));
const range: fc.Arbitrary<Range> = fc.record({
  type: fc.constantFrom(...TYPES),
  params: fc.array(fc.oneof(otherParam, charsetParam), { maxLength: 3 }),
});
const OFFERS = ['application/json', 'text/plain', 'text/plain;version=0.0.4', 'text/plain; charset=utf-8', 'text/plain; charset=latin1', 'application/json; charset=UTF-8', 'text/csv', 'image/png'];
const offers = fc.uniqueArray(fc.constantFrom(...OFFERS), { minLength: 1, maxLength: 4 });
const render = (ranges: Range[], withCharset: boolean): string =>
  ranges.map((r) => [r.type, ...r.params.filter((p) => withCharset || p.name !== 'charset').map((p) => p.text)].join('; ')).join(', ');
const hasCharset = (offer: string) => /charset/i.test(offer);

t.test('property: without charset parameters the rule is negotiator\'s', async (t) => {
  fc.assert(
    fc.property(fc.array(range, { maxLength: 5 }), offers, (ranges, offered) => {
      const accept = render(ranges, false);
      fc.pre(!/charset/i.test(accept));
      return JSON.stringify(acceptedMediaTypes(accept, offered)) === JSON.stringify(negotiated(accept, offered));
    }),
    { numRuns: 3000 },
  );
  // Arbitrary text, separators and quotes included.
  fc.assert(
    fc.property(fc.string({ unit: fc.constantFrom('a', 'b', '/', '*', ';', ',', '=', '"', '\\', ' ', 'q', '0', '.', 't') }), offers, (accept, offered) => {
      return JSON.stringify(acceptedMediaTypes(accept, offered)) === JSON.stringify(negotiated(accept, offered));
    }),
    { numRuns: 3000 },
  );
  t.pass('negotiator\'s order on every header tried');
});

t.test('property: a charset parameter counts only against an offer with a charset', async (t) => {
  // Reference: negotiator on the header as is for an offer with a charset, and on the header with its
  // charset parameters dropped for one without.
  fc.assert(
    fc.property(fc.array(range, { maxLength: 5 }), offers, (ranges, offered) => {
      const accept = render(ranges, true);
      for (const offer of offered) {
        const expected = negotiated(render(ranges, hasCharset(offer)), [offer]).length > 0;
        if ((acceptedMediaTypes(accept, [offer]).length > 0) !== expected) return false;
      }
      const plain = offered.filter((o) => !hasCharset(o));
      return JSON.stringify(acceptedMediaTypes(accept, plain)) === JSON.stringify(negotiated(render(ranges, false), plain));
    }),
    { numRuns: 5000 },
  );
  t.pass('the reference agrees on every header tried');
});

t.test('an offer that is a range (an endpoint producing */* or application/*) is allowed when a type it covers is', async (t) => {
  t.same(acceptedMediaTypes('application/json', ['*/*']), ['*/*'], 'springfox\'s default produces');
  t.same(acceptedMediaTypes('application/json', ['application/*']), ['application/*']);
  t.same(acceptedMediaTypes('text/html', ['application/*']), [], 'a type it does not cover');
  t.same(acceptedMediaTypes('application/json;q=0', ['*/*']), [], 'only a refused type named');
  t.same(acceptedMediaTypes('application/json;q=0, */*', ['*/*']), ['*/*'], 'other types allowed');
  t.same(acceptedMediaTypes('application/json; version=2', ['application/*']), ['application/*'], 'it covers parameters too');
  const table = compile([entry('GET', '/any', 'http://127.0.0.1:9001', { produces: ['*/*'] })]);
  t.equal(table.select('GET', '/any', undefined, 'application/json', false).status, 200, 'routing: no 406 for a JSON client');
});

t.test('property: a range offer is allowed exactly when one of the concrete types it covers is', async (t) => {
  // Reference: the rule for concrete offers, over every type the header names (with its parameters)
  // and types it does not name, under each type and none.
  const unlisted = ['application/x-unlisted', 'text/x-unlisted', 'x-unlisted/x-unlisted'];
  const covers = (offer: string, concrete: string): boolean => {
    const [type, subtype] = offer.toLowerCase().split('/');
    const [ctype, csubtype] = concrete.split(';')[0]!.trim().toLowerCase().split('/');
    return (type === '*' || type === ctype) && (subtype === '*' || subtype === csubtype);
  };
  const rangeNoNaN = range.filter((r) => !r.params.some((p) => p.text === 'q=abc'));
  fc.assert(
    fc.property(fc.array(rangeNoNaN, { maxLength: 5 }), fc.constantFrom('*/*', 'application/*', 'text/*', 'image/*'), (ranges, offer) => {
      const accept = render(ranges, true);
      // Each range made concrete where it meets the offer (a `*` of both: a name no range has), with its parameters.
      const offered = offer.split('/');
      const named = ranges
        .filter((r) => r.type.includes('/'))
        .map((r) => {
          const type = r.type.split('/').map((part, i) => (part !== '*' ? part : offered[i] !== '*' ? offered[i]! : 'x-unlisted')).join('/');
          return [type, ...r.params.filter((p) => p.name !== 'q').map((p) => p.text)].join('; ');
        });
      const concrete = [...named, ...unlisted, 'image/x-unlisted'].filter((c) => covers(offer, c));
      const expected = concrete.some((c) => acceptedMediaTypes(accept, [c]).length > 0);
      return (acceptedMediaTypes(accept, [offer]).length > 0) === expected;
    }),
    { numRuns: 5000 },
  );
  t.pass('the reference agrees on every header tried');
});
