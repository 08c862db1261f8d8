// trustedProxies: the address/CIDR matcher against node:net's BlockList (the reference), the client
// address rule, and the config messages.
import { BlockList } from 'node:net';
import fc from 'fast-check';
import t from 'tap';
import { parseConfig } from '../../src/config/load.js';
import { formatIp, inRange, parseIp, parseRange, type IpRange } from '../../src/http/ip-ranges.js';
import { TrustedProxies } from '../../src/http/trusted-proxies.js';

const SEED = Number(process.env.TRUST_SEED ?? Date.now() % 2 ** 31);

const v4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255)).map((parts) => parts.join('.'));
const v6Words = fc.array(fc.nat(0xffff), { minLength: 8, maxLength: 8 });
/** IPv6 text in several spellings: full, compressed (::), mixed case. */
const v6 = fc.tuple(v6Words, fc.boolean(), fc.boolean()).map(([words, compress, upper]) => {
  let text = words.map((w) => w.toString(16)).join(':');
  if (compress) text = text.replace(/(^|:)0(:0)+(:|$)/, '::');
  return upper ? text.toUpperCase() : text;
});
const address = fc.oneof(v4, v6, v4.map((a) => `::ffff:${a}`));

t.test('inRange agrees with node:net BlockList on random addresses and ranges', async (t) => {
  t.comment(`seed ${SEED} (TRUST_SEED replays)`);
  fc.assert(
    fc.property(address, address, fc.nat(128), (candidate, baseText, rawPrefix) => {
      const base = parseIp(baseText)!;
      const family = base.v6 === null ? 'ipv4' : 'ipv6';
      const prefix = rawPrefix % (family === 'ipv4' ? 33 : 129);
      const baseForList = base.v6 === null ? v4Text(base.v4) : baseText;
      const list = new BlockList();
      list.addSubnet(baseForList, prefix, family);
      const ip = parseIp(candidate)!;
      const range: IpRange = { base, prefix };
      const candidateForList = ip.v6 === null ? v4Text(ip.v4) : candidate;
      // BlockList checks an IPv4 address against an IPv6 subnet as ::ffff:a.b.c.d; our rule: an IPv6
      // range never covers IPv4 (write the IPv4 or ::ffff: range for that), so mixed families never match.
      const sameFamily = (ip.v6 === null) === (base.v6 === null);
      const expected = sameFamily && list.check(candidateForList, ip.v6 === null ? 'ipv4' : 'ipv6');
      return inRange(ip, range) === expected;
    }),
    { seed: SEED, numRuns: 3000 },
  );
});

t.test('inRange agrees with BlockList near range boundaries (addresses that share the prefix, or differ in one bit of it)', async () => {
  fc.assert(
    fc.property(fc.nat(0xffffffff), fc.nat(32), fc.nat(0xffffffff), fc.option(fc.nat(31), { nil: undefined }), (base, prefix, low, flip) => {
      const mask = prefix === 0 ? 0 : ~(0xffffffff >>> prefix) >>> 0;
      let candidate = ((base & mask) | (low & ~mask)) >>> 0;
      if (flip !== undefined && flip < prefix) candidate = (candidate ^ (1 << (31 - flip))) >>> 0;
      const list = new BlockList();
      list.addSubnet(v4Text(base), prefix, 'ipv4');
      const range: IpRange = { base: parseIp(v4Text(base))!, prefix };
      return inRange(parseIp(v4Text(candidate))!, range) === list.check(v4Text(candidate), 'ipv4');
    }),
    { seed: SEED, numRuns: 3000 },
  );
  fc.assert(
    fc.property(v6Words, fc.nat(128), v6Words, fc.option(fc.nat(127), { nil: undefined }), (base, prefix, low, flip) => {
      const candidate = base.map((word, i) => {
        const bits = Math.max(0, Math.min(16, prefix - 16 * i));
        const keep = bits === 0 ? 0 : (0xffff << (16 - bits)) & 0xffff;
        let value = (word & keep) | (low[i]! & ~keep & 0xffff);
        if (flip !== undefined && flip < prefix && Math.floor(flip / 16) === i) value ^= 1 << (15 - (flip % 16));
        return value;
      });
      // Keep both out of the ::ffff:0:0/96 space (that is IPv4 to both implementations' rules, differently).
      base[5]! |= 1;
      candidate[5]! |= 1;
      const text = (words: number[]) => words.map((w) => w.toString(16)).join(':');
      const list = new BlockList();
      list.addSubnet(text(base), prefix, 'ipv6');
      return inRange(parseIp(text(candidate))!, { base: parseIp(text(base))!, prefix }) === list.check(text(candidate), 'ipv6');
    }),
    { seed: SEED, numRuns: 3000 },
  );
});

function v4Text(n: number): string {
  return [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
}

t.test('addresses that are not addresses are refused', async (t) => {
  for (const bad of ['', '1.2.3', '1.2.3.4.5', '256.1.1.1', '01.2.3.4', '1.2.3.-1', 'a.b.c.d', '1::2::3', '12345::', ':::', 'g::1', '1:2:3:4:5:6:7:8:9', 'localhost']) {
    t.equal(parseIp(bad), null, JSON.stringify(bad));
  }
  for (const bad of ['10.0.0.0/33', '10.0.0.0/x', '::/129', '::ffff:10.0.0.0/64', '10.0.0.0/']) {
    t.type(parseRange(bad), 'string', `${bad}: ${String(parseRange(bad))}`);
  }
  const mapped = parseRange('::ffff:10.0.0.0/104') as IpRange;
  t.ok(inRange(parseIp('10.200.0.1')!, mapped), 'an IPv4-mapped range covers the IPv4 addresses');
});

t.test('client address: the rightmost hop that is not a trusted proxy', async (t) => {
  const trust = new TrustedProxies(['10.0.0.0/8', '2001:db8::/32']);
  t.equal(trust.clientAddress('203.0.113.1', '1.1.1.1'), '203.0.113.1', 'an untrusted peer is the client, whatever it claims');
  t.equal(trust.clientAddress('10.0.0.1', undefined), '10.0.0.1', 'a trusted peer that forwards for nobody');
  t.equal(trust.clientAddress('10.0.0.1', '198.51.100.4'), '198.51.100.4');
  t.equal(trust.clientAddress('10.0.0.1', '6.6.6.6, 198.51.100.4, 10.9.9.9'), '198.51.100.4', 'trusted hops are skipped, the client\'s own claim is not believed');
  t.equal(trust.clientAddress('10.0.0.1', '10.1.1.1, 10.2.2.2'), '10.1.1.1', 'every hop trusted: the leftmost');
  t.equal(trust.clientAddress('10.0.0.1', 'garbage, 10.2.2.2'), '10.2.2.2', 'a hop that is no address stops the walk at the trusted hop right of it');
  t.equal(trust.clientAddress('10.0.0.1', '198.51.100.4:5555'), '198.51.100.4', 'a port is dropped');
  t.equal(trust.clientAddress('10.0.0.1', '[2001:db9::1]:443'), '2001:db9::1', 'bracketed IPv6 with a port');
  t.equal(trust.clientAddress('2001:db8::5', '2001:db9::1, 2001:db8::7'), '2001:db9::1', 'IPv6 ranges');
  t.equal(trust.clientAddress('10.0.0.1', ''), '10.0.0.1', 'an empty header: the peer');
  // One client, one spelling: a rate-limit key and an access-log client per address, not per way of writing it.
  for (const spelling of ['::ffff:5.5.5.5', '::FFFF:5.5.5.5', '0:0:0:0:0:ffff:505:505', '[::ffff:5.5.5.5]:80']) {
    t.equal(trust.clientAddress('10.0.0.1', spelling), '5.5.5.5', `${spelling} is 5.5.5.5`);
  }
  t.equal(trust.clientAddress('10.0.0.1', '2001:DB9:0:0::1'), '2001:db9::1');
  t.notOk(new TrustedProxies([]).isTrusted('127.0.0.1'), 'an empty list trusts nobody');
});

t.test('config: trustProxies is refused naming trustedProxies; bad entries name the index', async (t) => {
  const error = (text: string): string => {
    try {
      parseConfig(text, 'gw.json');
    } catch (err) {
      return (err as Error).message;
    }
    return 'no error';
  };
  t.match(error('{"trustProxies": 1}'), /^gw\.json: \/trustProxies: is no longer supported: use "trustedProxies"/);
  t.match(error('{"trustedProxies": ["10.0.0.0/8", "10.0.0.300"]}'), /^gw\.json: \/trustedProxies\/1: "10\.0\.0\.300" is not an IPv4 or IPv6 address/);
  t.match(error('{"trustedProxies": ["10.0.0.0/40"]}'), /\/trustedProxies\/0: \/40 is longer than 32 bits/);
  t.match(error('{"port": 9000, "admin": {"port": 9000}}'), /\/admin\/port: 9000 is also the public port/);
  t.match(error('{"encodedSlashes": "allow"}'), /\/encodedSlashes: must be one of "reject", "keep"/);
  t.same(parseConfig('{"trustedProxies": ["::1", "10.0.0.0/8"]}', 'gw.json').trustedProxies, ['::1', '10.0.0.0/8']);
});

t.test('formatIp writes IPv6 as the WHATWG URL serializer does (RFC 5952), IPv4-mapped as IPv4', async () => {
  fc.assert(
    fc.property(v6, (text) => {
      const ip = parseIp(text)!;
      if (ip.v6 === null) return formatIp(ip) === new URL(`http://[${text}]`).hostname.replace(/^\[::ffff:(.*)\]$/, '$1') || /^[\d.]+$/.test(formatIp(ip));
      return formatIp(ip) === new URL(`http://[${text}]`).hostname.slice(1, -1);
    }),
    { numRuns: 2000, seed: SEED },
  );
  fc.assert(
    fc.property(v4, (text) => formatIp(parseIp(text)!) === text && formatIp(parseIp(`::ffff:${text}`)!) === text),
    { numRuns: 500, seed: SEED },
  );
});
