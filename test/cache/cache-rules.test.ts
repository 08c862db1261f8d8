// The response cache's parts on their own: keys and Vary (RFC 9111 4.1), the storing rules (RFC 9111 3
// and 4.2 through http-cache-semantics, plus docs/reference/response-cache.md#what-is-stored), the record and its Age, the one-Buffer
// encoding shared stores keep, and the flights that coalesce misses.
import fc from 'fast-check';
import t from 'tap';
import { CacheRecordError, decodeRecord, encodeRecord } from '../../src/cache/codec.js';
import { Flights } from '../../src/cache/flights.js';
import { comparedValue, primaryKey, requestOrigin, urlPrefix, variantKey, varyNames } from '../../src/cache/key.js';
import { LocalCacheStore } from '../../src/cache/local-store.js';
import { hasDirective, StoredResponse, VaryIndex } from '../../src/cache/record.js';
import { judge } from '../../src/cache/rules.js';
import { selects } from '../../src/cache/not-modified.js';
import { parseHttpDate } from '../../src/cache/http-date.js';

t.test('keys: the origin, the normalized path, the raw query, the endpoint', async (t) => {
  const o = 'http://gw.test';
  t.equal(primaryKey(o, '/items/{}', '/items/1', ''), 'http://gw.test/items/1 /items/{}');
  t.equal(primaryKey(o, '/items/{}', '/items/1', 'b=2&a=1'), 'http://gw.test/items/1?b=2&a=1 /items/{}');
  t.ok(primaryKey(o, '/items/{}', '/items/1', '').startsWith(urlPrefix(o, '/items/1', '')), 'a key starts with its URL prefix');
  t.notOk(primaryKey(o, '/items/{}', '/items/10', '').startsWith(urlPrefix(o, '/items/1', '')), 'and no other URL\'s');
  t.notOk(primaryKey(o, '/items/{}', '/items/1', 'a=1').startsWith(urlPrefix(o, '/items/1', '')), 'nor that of the same path with a query');
  t.notOk(primaryKey('http://gw.test.evil', '/items/{}', '/items/1', '').startsWith(urlPrefix(o, '/items/1', '')), 'nor that of another host');
  t.not(primaryKey(o, '/items/{}', '/items/1', 'a=1&b=2'), primaryKey(o, '/items/{}', '/items/1', 'b=2&a=1'), 'the raw query: order counts');
});

t.test('keys asked one after the other, any part changed or not: each is the key of its own parts (the last one is kept)', async (t) => {
  const part = (values: string[]) => fc.constantFrom(...values);
  const parts = fc.tuple(part(['http://a.test', 'https://a.test', 'http://b.test']), part(['/items/{}', '/items/{}/x']), part(['/items/1', '/items/2', '/items/1/x']), part(['', 'a=1', 'a=2']));
  fc.assert(
    fc.property(fc.array(parts, { minLength: 1, maxLength: 20 }), (calls) =>
      // Fresh strings each time, as requests have: equal values, never the same string object.
      calls.every(([origin, canonical, path, query]) => {
        const key = primaryKey(origin.slice(0), canonical.slice(0), `${path} `.slice(0, -1), `${query} `.slice(0, -1));
        return key === (query === '' ? `${origin}${path} ${canonical}` : `${origin}${path}?${query} ${canonical}`);
      }),
    ),
    { numRuns: 300 },
  );
  t.pass('every key is the one its parts make');
});

t.test('the origin: as forwarded, whole, lower-cased, default port dropped; a host that could run into the path is encoded', async (t) => {
  t.equal(requestOrigin(false, 'http', 'GW.Test:8080'), 'http://gw.test:8080');
  t.equal(requestOrigin(false, 'http', 'GW.Test:8080'), 'http://gw.test:8080', 'asked again (the remembered answer)');
  t.equal(requestOrigin(true, undefined, 'gw.test'), 'https://gw.test', 'no X-Forwarded-Proto: the connection\'s scheme');
  t.equal(requestOrigin(false, 'http', 'gw.test:80'), 'http://gw.test', 'the default port is the same URI (RFC 9110 4.2.3)');
  t.equal(requestOrigin(false, 'https', 'gw.test:443'), 'https://gw.test');
  t.equal(requestOrigin(false, 'https', 'gw.test:80'), 'https://gw.test:80', 'another scheme\'s default is a port like any');
  // An upstream may read the first item of a list: the key keeps the whole value apart from its last item.
  t.not(requestOrigin(false, 'https, http', 'a.test, b.test'), requestOrigin(false, 'http', 'b.test'), "a trusted proxy's list is not its last hop");
  t.not(requestOrigin(false, 'evil, https', 'b.test'), requestOrigin(false, 'https', 'b.test'));
  t.not(requestOrigin(false, 'gopher', 'gw.test'), requestOrigin(false, 'http', 'gw.test'), 'a scheme other than http(s) is kept apart');
  t.not(requestOrigin(false, 'http', 'gw.test', ';x-forwarded-prefix=/evil'), requestOrigin(false, 'http', 'gw.test'), 'other forwarding fields too');
  t.notMatch(requestOrigin(false, 'evil, https', 'a b, c', ';x-forwarded-port=1 2'), / /, 'never a space (it ends the URL part of a key)');
  t.equal(requestOrigin(false, 'http', '[::1]:8080'), 'http://[::1]:8080');
  t.equal(requestOrigin(false, 'http', 'a.test/x'), 'http://a.test%2Fx', 'a "/" cannot make host and path another URL');
  t.not(requestOrigin(false, 'http', 'a.test/x') + '/y', requestOrigin(false, 'http', 'a.test') + '/x/y');
  t.equal(requestOrigin(false, 'http', undefined), 'http://', 'no host');
});

t.test('Vary names (RFC 9110 12.5.5): case-insensitive, each once, "*" anywhere is "*"', async (t) => {
  t.same(varyNames('Accept-Language, accept-encoding'), ['accept-language', 'accept-encoding']);
  t.same(varyNames(' Accept ,, accept '), ['accept']);
  t.equal(varyNames('*'), '*');
  t.equal(varyNames('Accept, *'), '*');
  t.same(varyNames(''), []);
});

t.test('variants (RFC 9111 4.1): same values match; absent matches absent only; all values of a header count', async (t) => {
  const names = ['accept-language', 'accept-encoding'];
  const key = (headers: string[]) => variantKey('/x /x', names, headers);
  t.equal(key(['accept-language', 'en', 'accept-encoding', 'gzip']), key(['accept-encoding', 'gzip', 'x-other', '1', 'accept-language', 'en']), 'other headers and order do not matter');
  t.not(key(['accept-language', 'en']), key(['accept-language', 'de']));
  t.not(key([]), key(['accept-language', '']), 'absent is not empty');
  t.equal(key([]), key(['x-other', 'y']), 'absent matches absent');
  t.equal(key(['accept-language', 'en', 'accept-language', 'de']), key(['accept-language', 'en, de']), 'repeated headers are one list (RFC 9110 5.3)');
  t.not(key(['accept-language', 'en, de']), key(['accept-language', 'de, en']));
  t.not(variantKey('/x /x', ['a', 'b'], ['a', 'b=1']), variantKey('/x /x', ['a', 'b'], ['a', 'b', 'b', '1']), 'no value can forge another name');
});

t.test('credentials are kept as digests only', async (t) => {
  const value = comparedValue(['authorization', 'Bearer secret'], 'authorization')!;
  t.match(value, /^sha256:[A-Za-z0-9_-]{43}$/);
  t.notOk(value.includes('secret'));
  t.equal(comparedValue(['cookie', 'a=1'], 'cookie'), comparedValue(['cookie', 'a=1'], 'cookie'));
  t.not(comparedValue(['cookie', 'a=1'], 'cookie'), comparedValue(['cookie', 'a=2'], 'cookie'));
  // Cookie lines join with "; ", as a server reads them: two lines are the one line with both cookies.
  t.equal(comparedValue(['cookie', 'a=1', 'cookie', 'b=2'], 'cookie'), comparedValue(['cookie', 'a=1; b=2'], 'cookie'));
  t.not(comparedValue(['cookie', 'a=1', 'cookie', 'b=2'], 'cookie'), comparedValue(['cookie', 'a=1, b=2'], 'cookie'));
  t.equal(comparedValue(['accept', 'text/html'], 'accept'), 'text/html');
});

t.test('Cache-Control directives', async (t) => {
  t.ok(hasDirective('public, max-age=60', 'max-age'));
  t.ok(hasDirective('no-cache="set-cookie"', 'no-cache'));
  t.notOk(hasDirective('s-maxage=60', 'max-age'));
  t.notOk(hasDirective('max-agent', 'max-age'));
  t.notOk(hasDirective('', 'public'));
});

type Case = [name: string, request: string[], status: number, headers: string[], defaultTtlMs: number, expected: 'fresh' | 'no lifetime' | 'forbidden'];
const future = new Date(Date.now() + 3600_000).toUTCString();
const past = new Date(Date.now() - 3600_000).toUTCString();
const cases: Case[] = [
  ['max-age', [], 200, ['cache-control', 'max-age=60'], 0, 'fresh'],
  ['s-maxage (shared)', [], 200, ['cache-control', 's-maxage=60'], 0, 'fresh'],
  ['Expires in the future', [], 200, ['expires', future], 0, 'fresh'],
  ['Expires in the past', [], 200, ['expires', past], 0, 'no lifetime'],
  ['Expires "0" (RFC 9111 5.3: already expired)', [], 200, ['expires', '0'], 0, 'no lifetime'],
  ['max-age wins over Expires', [], 200, ['cache-control', 'max-age=60', 'expires', past], 0, 'fresh'],
  ['no freshness information', [], 200, [], 0, 'no lifetime'],
  ['no heuristic from Last-Modified', [], 200, ['last-modified', past], 0, 'no lifetime'],
  ['no implicit lifetime for immutable', [], 200, ['cache-control', 'immutable'], 0, 'no lifetime'],
  ['defaultTtlMs for a 200 without one', [], 200, [], 1500, 'fresh'],
  ['defaultTtlMs not for a 404', [], 404, [], 1500, 'no lifetime'],
  ['defaultTtlMs not over no-cache', [], 200, ['cache-control', 'no-cache'], 1500, 'no lifetime'],
  ['404 with max-age', [], 404, ['cache-control', 'max-age=60'], 0, 'fresh'],
  ['private', [], 200, ['cache-control', 'private, max-age=60'], 0, 'forbidden'],
  ['no-store', [], 200, ['cache-control', 'max-age=60, no-store'], 0, 'forbidden'],
  ['Set-Cookie even when public', [], 200, ['cache-control', 'public, max-age=60', 'set-cookie', 'a=1'], 0, 'forbidden'],
  ['Vary: *', [], 200, ['cache-control', 'max-age=60', 'vary', '*'], 0, 'forbidden'],
  ['Vary with * in the list', [], 200, ['cache-control', 'max-age=60', 'vary', 'accept, *'], 0, 'forbidden'],
  ['206 (not understood)', [], 206, ['cache-control', 'max-age=60'], 0, 'forbidden'],
  ['500 with explicit freshness (RFC 9111 3: any final status)', [], 500, ['cache-control', 'max-age=60'], 0, 'fresh'],
  ['304', [], 304, ['cache-control', 'max-age=60'], 0, 'forbidden'],
  ['request no-store', ['cache-control', 'no-store'], 200, ['cache-control', 'max-age=60'], 0, 'forbidden'],
  ['Authorization, max-age only', ['authorization', 'Bearer x'], 200, ['cache-control', 'max-age=60'], 0, 'forbidden'],
  ['Authorization, public', ['authorization', 'Bearer x'], 200, ['cache-control', 'public, max-age=60'], 0, 'fresh'],
  ['Authorization, s-maxage', ['authorization', 'Bearer x'], 200, ['cache-control', 's-maxage=60'], 0, 'fresh'],
  ['Authorization, must-revalidate (RFC 9111 3.5)', ['authorization', 'Bearer x'], 200, ['cache-control', 'max-age=60, must-revalidate'], 0, 'fresh'],
  ['Authorization, proxy-revalidate (not enough)', ['authorization', 'Bearer x'], 200, ['cache-control', 'max-age=60, proxy-revalidate'], 0, 'forbidden'],
  ['Authorization, no lifetime, defaultTtlMs', ['authorization', 'Bearer x'], 200, [], 1500, 'forbidden'],
  ['must-revalidate: stored while fresh', [], 200, ['cache-control', 'max-age=60, must-revalidate'], 0, 'fresh'],
  ['arrived older than its max-age', [], 200, ['cache-control', 'max-age=60', 'age', '61'], 0, 'no lifetime'],
];

t.test('what may be stored (RFC 9111 3 and 4.2, and docs/reference/response-cache.md#what-is-stored)', async (t) => {
  for (const [name, request, status, headers, defaultTtlMs, expected] of cases) {
    const verdict = judge('/x /x', request, status, headers, defaultTtlMs);
    const got = !verdict.storable ? 'forbidden' : verdict.policy === null ? 'no lifetime' : 'fresh';
    t.equal(got, expected, name);
  }
  const rounded = judge('/x /x', [], 200, [], 1500, );
  t.equal(rounded.policy!.maxAge(), 2, 'defaultTtlMs rounded up to whole seconds');
  t.same(judge('/x /x', [], 200, ['cache-control', 'max-age=60', 'vary', 'Accept-Language', 'vary', 'Accept-Encoding'], 0).vary, ['accept-language', 'accept-encoding']);
});

function stored(headers: string[], body = 'body', status = 200, request: string[] = []): StoredResponse {
  const verdict = judge('/x /x', request, status, headers, 0);
  return new StoredResponse(status, headers, Buffer.from(body), verdict.policy!, '/x /x', Date.now());
}

t.test('a stored response: freshness, flags, Age, and its answer built once per second', async (t) => {
  const record = stored(['cache-control', 'public, max-age=60, must-revalidate', 'age', '10', 'etag', '"a"']);
  const now = Date.now();
  t.ok(Math.abs(record.freshUntil - (now + 50_000)) < 100, 'fresh for max-age less the Age it arrived with');
  t.ok(record.mustRevalidate);
  t.ok(record.sharedWithAuth);
  t.equal(record.ageAt(now), 10);
  t.equal(record.ageAt(now + 2600), 13, 'rounded, as http-cache-semantics rounds it');
  const hit = record.answer('HIT', now);
  t.equal(record.answer('HIT', now + 100), hit, 'the same object within the second');
  t.same(hit.headers.slice(-4), ['age', '10', 'x-cache', 'HIT']);
  t.not(record.answer('HIT', now + 1600), hit, 'a new one once Age changed');
  t.same(record.answer('STALE', now).headers.slice(-2), ['x-cache', 'STALE']);
  t.notOk(stored(['cache-control', 'max-age=60']).sharedWithAuth);
});

t.test('a record as one Buffer and back: what another instance needs to serve it', async (t) => {
  const record = stored(['cache-control', 'max-age=60', 'vary', 'accept', 'link', '<a>', 'link', '<b>'], 'bytes \u00e9\u0000!', 203, ['accept', 'text/html']);
  const bytes = encodeRecord(record);
  t.ok(Buffer.isBuffer(bytes));
  const back = decodeRecord(bytes);
  if (!(back instanceof StoredResponse)) throw new Error('not a response');
  t.equal(back.status, 203);
  t.same(back.headers, record.headers);
  t.ok(back.body.equals(record.body), 'body byte for byte');
  t.equal(back.url, record.url);
  t.equal(back.storedAt, record.storedAt);
  t.ok(Math.abs(back.freshUntil - record.freshUntil) < 5, 'the same freshness (the policy keeps the response time)');
  t.equal(back.ageAt(Date.now() + 5000), record.ageAt(Date.now() + 5000));
  t.equal(back.size, record.size);
  t.ok(back.policy.satisfiesWithoutRevalidation({ method: 'GET', url: '/x /x', headers: { accept: 'text/html' } }), 'the policy still matches its variant');
  t.notOk(back.policy.satisfiesWithoutRevalidation({ method: 'GET', url: '/x /x', headers: { accept: 'image/png' } }));
  const index = decodeRecord(encodeRecord(new VaryIndex(['accept', 'accept-language'], 42)));
  t.same(index instanceof VaryIndex ? [index.names, index.storedAt] : null, [['accept', 'accept-language'], 42]);
});

t.test('bytes that are not a record of this format are refused, saying why', async (t) => {
  const good = encodeRecord(stored(['cache-control', 'max-age=60']));
  const refused = (bytes: Buffer, message: RegExp) => t.throws(() => decodeRecord(bytes), { name: 'CacheRecordError', message }, message.source);
  refused(Buffer.from('hello'), /not a cache record of this format/);
  refused(Buffer.concat([Buffer.from('SGC\u0002', 'latin1'), good.subarray(4)]), /not a cache record of this format/);
  refused(good.subarray(0, 20), /truncated/);
  const badJson = Buffer.from(good);
  badJson[9] = 0x7b;
  badJson[10] = 0x7b;
  refused(badJson, /not valid JSON/);
  const badKind = Buffer.from(good);
  badKind[4] = 9;
  refused(badKind, /unknown cache record kind 9/);
  const meta = (object: unknown, kind = 1) => {
    const json = Buffer.from(JSON.stringify(object));
    const head = Buffer.alloc(9);
    head.write('SGC\u0001', 'latin1');
    head[4] = kind;
    head.writeUInt32BE(json.length, 5);
    return Buffer.concat([head, json]);
  };
  refused(meta({ s: 200, h: [], p: {}, u: '/x' }), /stored-at/);
  refused(meta({ s: 99, h: [], p: {}, u: '/x', t: 1 }), /invalid status 99/);
  refused(meta({ s: 200, h: ['a'], p: {}, u: '/x', t: 1 }), /flat name\/value list/);
  refused(meta({ s: 200, h: [], p: { v: 7 }, u: '/x', t: 1 }), /policy unreadable/);
  refused(meta({ t: 1, v: [1] }, 2), /Vary index/);
  t.ok(new CacheRecordError('x') instanceof Error);
});

t.test('the local store: bounded in bytes, least recently used out first, events for the metrics', async (t) => {
  let bytes = 0;
  let evictions = 0;
  const store = new LocalCacheStore(3000, {
    added: (n) => (bytes += n),
    removed: (n, evicted) => {
      bytes -= n;
      if (evicted) evictions++;
    },
  });
  const record = () => stored(['cache-control', 'max-age=60'], 'x'.repeat(500));
  const size = record().size;
  t.ok(size > 1000 && size < 1500, `about 500 + 512 bytes (${size})`);
  store.set('a', record(), 60_000);
  store.set('b', record(), 60_000);
  t.equal(bytes, 2 * size);
  store.get('a');
  store.set('c', record(), 60_000);
  t.equal(evictions, 1);
  t.equal(store.get('b'), undefined, 'b was the least recently used');
  t.ok(store.get('a') && store.get('c'));
  t.equal(bytes, store.bytes);
  store.set('a', record(), 60_000);
  t.equal(bytes, store.bytes, 'a replacement gives back the old size');
  store.set('short', record(), 20);
  await new Promise((resolve) => setTimeout(resolve, 40));
  t.equal(store.get('short'), undefined, 'expired');
  t.equal(bytes, store.bytes);
  await store.close();
  t.equal(bytes, 0, 'closed: nothing held');
});

t.test('flights: followers wake with the outcome, or alone at their deadline', async (t) => {
  const flights = new Flights();
  const flight = flights.start('k');
  t.equal(flights.get('k'), flight);
  const early = flight.wait(1000);
  const late = flight.wait(20);
  t.equal(await late, null, 'its own deadline passed');
  t.equal(flight.waiting, 1);
  flight.land({ stored: true, stale: null });
  t.same(await early, { stored: true, stale: null });
  t.equal(flights.get('k'), undefined, 'landed: gone');
  t.equal(await flight.wait(1000), null, 'waiting on a landed flight: at once');
  t.equal(await flights.start('k2').wait(0), null, 'no time left: at once');
});

// ---- RFC 9110/9111 read to the letter where http-cache-semantics reads otherwise (rules.ts) ------

t.test('HTTP-date: the three forms, strictly; RFC 850 two-digit years; Date.parse texts refused', async (t) => {
  const { formatHttpDate } = await import('../../src/cache/http-date.js');
  const ms = Date.UTC(1994, 10, 6, 8, 49, 37);
  t.equal(parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT'), ms, 'IMF-fixdate');
  t.equal(parseHttpDate('Sunday, 06-Nov-94 08:49:37 GMT', Date.UTC(2000, 0, 1)), ms, 'RFC 850 in 2000: 94 is 1994');
  const now2026 = Date.UTC(2026, 10, 25);
  t.equal(parseHttpDate('Thursday, 01-Jan-70 00:00:00 GMT', now2026), Date.UTC(2070, 0, 1), 'RFC 850 in 2026: 70 is 2070 (not more than 50 years ahead)');
  t.equal(parseHttpDate('Saturday, 01-Jan-99 00:00:00 GMT', now2026), Date.UTC(1999, 0, 1), 'RFC 850 in 2026: 99 is 1999 (2099 is more than 50 years ahead)');
  t.equal(parseHttpDate('Sun Nov  6 08:49:37 1994'), ms, 'asctime');
  for (const bad of ['0', '-1', '2026-11-25T10:00:00Z', 'Sun, 6 Nov 1994 08:49:37 GMT', 'Sun, 06 Nov 1994 08:49:37 PST', 'Sun, 31 Feb 1994 08:49:37 GMT', 'tomorrow', '1732530000']) {
    t.equal(parseHttpDate(bad), null, `not an HTTP-date: ${JSON.stringify(bad)}`);
  }
  const fc = await import('fast-check');
  fc.assert(
    fc.property(fc.integer({ min: 0, max: Date.UTC(9999, 0, 1) }), (n) => parseHttpDate(formatHttpDate(n)) === Math.floor(n / 1000) * 1000),
  );
});

t.test('the rules on malformed and edge inputs (each as the RFC reads it)', async (t) => {
  const now = Date.now();
  const date = new Date(now).toUTCString();
  const fresh = (headers: string[], status = 200) => {
    const verdict = judge('/k /k', [], status, headers, 0);
    return verdict.policy === null ? (verdict.storable ? 'no lifetime' : 'forbidden') : 'fresh';
  };
  t.equal(fresh(['date', date, 'expires', 'tomorrow']), 'no lifetime', 'an invalid Expires is already expired (Date.parse would take some)');
  t.equal(fresh(['date', date, 'expires', '2099-01-01']), 'no lifetime', 'an ISO date is not an HTTP-date');
  t.equal(fresh(['date', date, 'expires', '0']), 'no lifetime', 'Expires: 0 is expired');
  t.equal(fresh(['date', new Date(now - 7200_000).toUTCString(), 'cache-control', 'max-age=3600']), 'no lifetime', 'a Date two hours old: the apparent age exceeds max-age');
  t.equal(fresh(['date', new Date(now - 7200_000).toUTCString(), 'expires', new Date(now - 3600_000).toUTCString()]), 'no lifetime', 'Expires measured from Date: stale on arrival');
  t.equal(fresh(['date', 'garbage', 'cache-control', 'max-age=60']), 'fresh', 'an invalid Date is as if absent');
  t.equal(fresh(['cache-control', 'max-age=60', 'age', '7200.0']), 'fresh', 'Age 7200.0 is not an integer: ignored');
  t.equal(fresh(['cache-control', 'max-age=60', 'age', '7200']), 'no lifetime', 'Age 7200 counts');
  t.equal(fresh(['cache-control', 'max-age=60', 'age', '-5']), 'fresh', 'a negative Age is ignored');
  t.equal(fresh(['cache-control', 'MAX-AGE=60']), 'fresh', 'directive names are case-insensitive');
  t.equal(fresh(['cache-control', 'No-Store, max-age=60']), 'forbidden', 'No-Store');
  t.equal(fresh(['cache-control', 'PRIVATE, max-age=60']), 'forbidden', 'PRIVATE');
  t.equal(fresh(['cache-control', 'max-age=60'], 500), 'fresh', 'a 500 with explicit freshness may be stored');
  t.equal(fresh(['cache-control', 'max-age=60'], 299), 'fresh', 'an unknown 2xx with explicit freshness may be stored');
  t.equal(fresh(['cache-control', 'max-age=60'], 206), 'forbidden', '206 is never stored');
  t.equal(fresh([], 503), 'forbidden', 'a 503 without freshness is not');
  const sMaxage = new StoredResponse(200, ['cache-control', 'S-MAXAGE=60'], Buffer.from('x'), judge('/k /k', [], 200, ['cache-control', 'S-MAXAGE=60'], 0).policy!, '/k /k', now);
  t.ok(sMaxage.mustRevalidate, 's-maxage implies proxy-revalidate in a shared cache');
  const lastModified = new Date(now - 100 * 86400_000).toUTCString();
  t.equal(judge('/k /k', [], 200, ['date', date, 'last-modified', lastModified], 0).policy, null, 'no heuristic freshness by default');
  const heuristic = judge('/k /k', [], 200, ['date', date, 'last-modified', lastModified], 0, { maxMs: 3600_000 }).policy!;
  t.equal(heuristic.maxAge(), 3600, 'heuristic: 10% of 100 days, capped at one hour');
  const small = judge('/k /k', [], 200, ['date', date, 'last-modified', new Date(now - 1000_000).toUTCString()], 0, { maxMs: 3600_000 }).policy!;
  t.equal(small.maxAge(), 100, 'heuristic: 10% of 1,000 s');
  t.equal(judge('/k /k', [], 500, ['date', date, 'last-modified', lastModified], 0, { maxMs: 3600_000 }).policy, null, 'not for a status that is not heuristically cacheable');
});

t.test('rules the public HTTP cache test suite showed we read wrong', async (t) => {
  const now = Date.now();
  const date = new Date(now).toUTCString();
  const verdict = (headers: string[], targeted: string[] = []) => {
    const v = judge('/k /k', [], 200, headers, 0, null, now, targeted);
    return v.policy === null ? (v.storable ? 'no lifetime' : 'forbidden') : v.policy.maxAge() - v.policy.age() > 0 ? 'fresh' : 'revalidate';
  };
  // Age as a list: its first member counts (RFC 9111 5.1).
  t.equal(verdict(['date', date, 'cache-control', 'max-age=3600', 'age', '7200, 0']), 'no lifetime', 'Age "7200, 0": 7200');
  t.equal(verdict(['date', date, 'cache-control', 'max-age=3600', 'age', '7200', 'age', '0']), 'no lifetime', 'two Age lines, 7200 first: 7200');
  t.equal(verdict(['date', date, 'cache-control', 'max-age=3600', 'age', '0, 7200']), 'fresh', 'Age "0, 7200": 0');
  // no-cache with a validator: kept, to be revalidated on every use (RFC 9111 5.2.2.4), never served stale.
  t.equal(verdict(['cache-control', 'no-cache', 'etag', '"a"']), 'revalidate', 'no-cache and ETag: stored for revalidation');
  t.equal(verdict(['cache-control', 'no-cache, max-age=3600', 'etag', '"a"']), 'revalidate', 'no-cache with max-age: still revalidated on use');
  t.equal(verdict(['cache-control', 'no-cache']), 'no lifetime', 'no-cache without a validator: nothing to revalidate with');
  t.equal(verdict(['cache-control', 'max-age=0', 'last-modified', date]), 'revalidate', 'an explicit lifetime already spent, with Last-Modified');
  t.equal(verdict(['etag', '"a"']), 'no lifetime', 'no lifetime at all: not stored (heuristics are opt-in)');
  const noCache = judge('/k /k', [], 200, ['cache-control', 'no-cache', 'etag', '"a"'], 0).policy!;
  t.ok(new StoredResponse(200, ['cache-control', 'no-cache', 'etag', '"a"'], Buffer.from('x'), noCache, '/k /k', now).mustRevalidate, 'a no-cache entry is never served stale');
  // must-understand (RFC 9111 5.2.2.3): no-store is lifted for a status this cache understands only.
  const status = (code: number, headers: string[]) => {
    const v = judge('/k /k', [], code, headers, 0, null, now);
    return v.policy === null ? (v.storable ? 'no lifetime' : 'forbidden') : 'fresh';
  };
  t.equal(status(200, ['cache-control', 'max-age=3600, no-store, must-understand']), 'fresh', '200 with no-store, must-understand: stored');
  t.equal(status(404, ['cache-control', 'max-age=3600, No-Store, MUST-UNDERSTAND']), 'fresh', 'names in any case');
  t.equal(status(599, ['cache-control', 'max-age=3600, no-store, must-understand']), 'forbidden', 'an unknown status: not stored');
  t.equal(status(599, ['cache-control', 'max-age=3600, must-understand']), 'forbidden', 'an unknown status: not stored even without no-store');
  t.equal(status(200, ['cache-control', 'max-age=3600, no-store']), 'forbidden', 'no-store alone still forbids');
  // If-Modified-Since against an entry without Last-Modified: its Date stands in (RFC 9111 4.3.2).
  const dated = ['cache-control', 'max-age=3600', 'date', new Date(now - 60_000).toUTCString()];
  const entry = new StoredResponse(200, ['cache-control', 'max-age=60'], Buffer.from('x'), judge('/k /k', [], 200, dated, 0, null, now).policy!, '/k /k', now);
  t.ok(entry.notModified(['if-modified-since', new Date(now - 30_000).toUTCString()], parseHttpDate), 'modified since a time after its Date: no');
  t.notOk(entry.notModified(['if-modified-since', new Date(now - 120_000).toUTCString()], parseHttpDate), 'since a time before its Date: yes');
  // A targeted field that is not a valid Structured Field Dictionary, or whose lifetime is not an Integer, is ignored (RFC 9213 2.1).
  const cdn = ['cdn-cache-control'];
  t.equal(verdict(['cache-control', 'no-store', 'cdn-cache-control', 'max-age=60'], cdn), 'fresh', 'a valid CDN-Cache-Control rules');
  t.equal(verdict(['cache-control', 'no-store', 'cdn-cache-control', 'max-age=10000, &&&&&'], cdn), 'forbidden', 'one that does not parse: Cache-Control rules');
  t.equal(verdict(['cache-control', 'no-store', 'cdn-cache-control', 'max-age="10000"'], cdn), 'forbidden', 'max-age as a String: ignored');
  t.equal(verdict(['cache-control', 'no-store', 'cdn-cache-control', 'max-age=1.5'], cdn), 'forbidden', 'max-age as a Decimal: ignored');
  t.equal(verdict(['cache-control', 'no-store', 'cdn-cache-control', 'MAX-AGE=60'], cdn), 'forbidden', 'an upper-case key is not a Structured Field key');
  t.equal(verdict(['cache-control', 'max-age=60', 'cdn-cache-control', 'no-store'], cdn), 'forbidden', 'a valid no-store wins over Cache-Control');
  t.equal(verdict(['cache-control', 'no-store', 'gw-cache-control', 'max-age="1"', 'cdn-cache-control', 'max-age=60'], ['gw-cache-control', 'cdn-cache-control']), 'fresh', 'an invalid first field: the next one applies');
  t.equal(verdict(['cache-control', 'no-store', 'cdn-cache-control', 'max-age=60', 'cdn-cache-control', 'must-revalidate'], cdn), 'fresh', 'several lines are one Dictionary');
});

/** The lifetime the rules give an answer with these headers (seconds; 0: stale or none). */
function lifetime(headers: string[]): { maxAge: number } {
  const policy = judge('/k /k', [], 200, headers, 0).policy;
  return { maxAge: policy === null ? 0 : policy.maxAge() };
}

t.test('max-age and s-maxage as RFC 9111 reads them: the first occurrence, delta-seconds only, at most 2^31', async (t) => {
  const table: Array<[cacheControl: string | string[], seconds: number, why: string]> = [
    ['max-age=60', 60, 'digits'],
    ['max-age=003600', 3600, 'leading zeros are digits'],
    ['max-age="60"', 60, 'the quoted form'],
    ['max-age=0, max-age=60', 0, 'the first occurrence counts (4.2.1), not the last'],
    ['max-age=60, max-age=0', 60, 'the first occurrence counts'],
    [['max-age=0', 'max-age=60'], 0, 'also over two lines'],
    ['s-maxage=0, s-maxage=60', 0, 's-maxage too'],
    ['max-age=1e3', 0, 'an exponent is not delta-seconds: stale'],
    ['max-age=1.9', 0, 'a decimal: stale'],
    ['max-age=3600.0', 0, 'a decimal zero: stale'],
    ['max-age=2abc', 0, 'trailing letters: stale, not the leading digits'],
    ['max-age=a100', 0, 'leading letters: stale'],
    ['max-age = 60', 0, 'spaces around "=": not a valid max-age, stale'],
    ['max-age =60', 0, 'a space before "="'],
    ['max-age= 60', 0, 'a space after "="'],
    ['max-age=-1', 0, 'a negative number: stale'],
    ['max-age=', 0, 'no value: stale'],
    ['max-age', 0, 'no argument: stale'],
    ["max-age='60'", 0, 'single quotes are not quoting'],
    ['max-age=99999999999999999999999', 2147483648, 'too large: 2^31 (1.2.2)'],
    ['max-age=2abc, max-age=60', 0, 'an invalid first occurrence is still the one that counts'],
    ['Max-Age=60, public', 60, 'names in any case'],
    ['extension="max-age=3600", max-age=1', 1, 'a max-age inside a quoted string is not one'],
  ];
  for (const [cacheControl, seconds, why] of table) {
    const headers = Array.isArray(cacheControl) ? cacheControl.flatMap((line) => ['cache-control', line]) : ['cache-control', cacheControl];
    t.equal(lifetime(headers).maxAge, seconds, `${JSON.stringify(cacheControl)}: ${why}`);
  }
  // Any value: fresh for exactly its digits (quoted or not, capped at 2^31), else stale.
  const value = fc.oneof(
    fc.nat().map(String),
    fc.string({ unit: fc.constantFrom('0', '1', '9', '.', 'e', '+', '-', ' ', '"', 'x'), maxLength: 8 }),
  );
  fc.assert(
    fc.property(value, (v) => {
      // Whitespace after the value is the list's, before the next comma.
      const w = v.replace(/ +$/, '');
      const inner = w.length >= 2 && w.startsWith('"') && w.endsWith('"') ? w.slice(1, -1) : w;
      const valid = /^\d+$/.test(inner);
      const expected = valid ? Math.min(Number(inner), 2147483648) : 0;
      return lifetime(['cache-control', `max-age=${v}`]).maxAge === expected;
    }),
    { numRuns: 2000 },
  );
});

t.test('Age as RFC 9111 reads it: a non-negative integer, one too large is 2^31 (stale), not ignored', async (t) => {
  // With an ETag a stale answer is kept for revalidation, so its policy (and the Age it read) can be looked at.
  const age = (value: string) => Math.round(judge('/k /k', [], 200, ['cache-control', 'max-age=60', 'etag', '"a"', 'age', value], 0).policy!.age());
  t.equal(age('99999999999999999999999'), 2147483648, 'too large: 2^31 (1.2.2), not ignored');
  t.equal(age('2147483649'), 2147483648);
  t.equal(age('30'), 30);
  t.equal(lifetime(['cache-control', 'max-age=60', 'age', '99999999999999999999999']).maxAge, 0, 'so stale on arrival: not kept');
  t.equal(lifetime(['cache-control', 'max-age=60', 'age', '30']).maxAge, 60);
});

const MODIFIED_1 = 'Wed, 21 Oct 2015 07:28:00 GMT';

t.test('which stored response a 304 selects for update (RFC 9111 4.3.4)', async (t) => {
  const entry = (headers: string[]) => stored(['cache-control', 'max-age=60', ...headers]);
  const table: Array<[stored: string[], update: string[], selected: boolean, why: string]> = [
    [['etag', '"v1"'], ['etag', '"v1"'], true, 'the same ETag'],
    [['etag', '"v1"'], ['etag', '"v2"'], false, 'another ETag: must not update'],
    [['etag', '"v1"', 'last-modified', MODIFIED_1], ['etag', '"v2"', 'last-modified', MODIFIED_1], false, 'another ETag, whatever the date'],
    [['etag', 'W/"v1"'], ['etag', '"v1"'], true, 'the W/ prefix is not compared'],
    [['etag', '"v1"'], ['etag', 'W/"v1"'], true, 'either way'],
    [['last-modified', MODIFIED_1], ['etag', '"v1"'], false, 'an ETag where the entry has none'],
    [['last-modified', MODIFIED_1], ['last-modified', MODIFIED_1], true, 'the same Last-Modified'],
    [['last-modified', MODIFIED_1], ['last-modified', 'Wednesday, 21-Oct-15 07:28:00 GMT'], true, 'the same instant in another form'],
    [['last-modified', MODIFIED_1], ['last-modified', 'Thu, 22 Oct 2015 07:28:00 GMT'], false, 'another Last-Modified: must not update'],
    [['etag', '"v1"', 'last-modified', MODIFIED_1], ['last-modified', MODIFIED_1], true, 'no ETag in the 304: the date decides'],
    [['etag', '"v1"'], ['last-modified', MODIFIED_1], false, 'a date where the entry has none'],
    [['last-modified', MODIFIED_1], ['cache-control', 'max-age=60'], true, 'no validator at all: the one entry the request named'],
  ];
  for (const [headers, update, selected, why] of table) t.equal(selects(entry(headers), update), selected, why);
});
