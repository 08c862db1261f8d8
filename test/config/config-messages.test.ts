// How problems are worded. A value that does not match its key's pattern is refused with what the key
// must be, in words: a header name is not "an HTTP method like GET" although both are HTTP tokens, and no
// message shows a regex. A value of the wrong type for an enum is one line, a number JSON cannot hold is
// shown as what it became, and a UTF-16 file is named as one.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ConfigError, parseConfig } from '../../src/config/load.js';
import { gateway } from '../helpers/cli.js';

const HEADER = 'must be a header name: an HTTP token (letters, digits and !#$%&\'*+-.^_`|~; no spaces or colons)';
const HOST = 'must be a host name, or "*." and a host name: labels of letters, digits, "-" and "_" (at most 63 characters each) joined by dots';

const upstream = (extra: object) => ({ serviceType: 'static', serviceLocation: 'http://a', endpoints: [{ method: 'GET', path: '/a' }], ...extra });
const cases: Array<[string, Record<string, unknown>, string]> = [
  ['/requestId/header', { requestId: { header: 'x-id:' } }, HEADER],
  ['/middleware/0/header', { middleware: [{ id: 'auth', type: 'apiKeyAuth', header: 'api key', keys: [] }] }, HEADER],
  ['/middleware/0/targetedCacheControl/0', { middleware: [{ id: 'c', type: 'responseCache', targetedCacheControl: ['CDN Cache-Control'] }] }, HEADER],
  ['/listeners/0/ignoreHeaders/0', { listeners: [{ id: 'l', type: 'alternateUpstream', serviceLocation: 'http://b', mismatchLog: null, ignoreHeaders: ['x:y'] }] }, HEADER],
  ['/listeners/0/methods/0', { listeners: [{ id: 'l', type: 'alternateUpstream', serviceLocation: 'http://b', mismatchLog: null, methods: ['G ET'] }] }, 'must be an HTTP method like "GET"'],
  ['/upstreams/0/endpoints/0/method', { upstreams: [{ ...upstream({}), endpoints: [{ method: 'G ET', path: '/a' }] }] }, 'must be an HTTP method like "GET"'],
  ['/upstreams/0/hosts/0', { upstreams: [upstream({ hosts: ['api example.com'] })] }, HOST],
  ['/middleware/0/id', { middleware: [{ id: 'my cache', type: 'responseCache' }] }, 'must be letters, digits, "_", "." or "-"'],
  ['/middleware/0/key', { middleware: [{ id: 'rl', type: 'rateLimit', limit: 1, windowMs: 1000, key: 'header:x y' }] }, 'must be "ip", "consumer" or "header:" and a header name (an HTTP token)'],
  ['/middleware/0/keys/0/sha256', { middleware: [{ id: 'auth', type: 'apiKeyAuth', keys: [{ consumer: 'c', sha256: 'abc' }] }] }, 'must be a hex SHA-256 digest: 64 hex digits (`gateway hash-key` prints one)'],
  ['/tracing/otlpEndpoint', { tracing: { otlpEndpoint: 'grpc://collector:4317' } }, 'must be an http:// or https:// URL, without spaces'],
  ['/kvStores/shared/url', { kvStores: { shared: { type: 'redis', url: 'http://redis:6379' } } }, 'must be a redis:// or rediss:// URL'],
];

for (const [pointer, config, reason] of cases) {
  t.test(pointer, async (t) => {
    let message = '';
    try {
      parseConfig(JSON.stringify(config), 'gw.json');
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      message = err.message;
    }
    t.match(message, new RegExp(`^gw\\.json: ${pointer}: ${reason.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(got "[^"]*"\\)$`));
  });
}

// A name longer than a DNS name may be (253 characters) could match no Host and no SNI name.
t.test('a hosts or serverNames entry longer than 253 characters is refused', async (t) => {
  const label = 'a'.repeat(60);
  const long = `*.${[label, label, label, label].join('.')}.testerab`;
  t.equal(long.length, 254);
  const fits = long.slice(0, -1);
  for (const [pointer, config] of [
    ['/upstreams/0/hosts/1', (name: string) => ({ upstreams: [upstream({ hosts: ['ok.test', name] })] })],
    ['/tls/certificates/0/serverNames/0', (name: string) => ({ tls: { port: 8443, certificates: [{ certFile: 'c.pem', keyFile: 'k.pem', serverNames: [name] }] } })],
  ] as const) {
    t.match(messageOf(JSON.stringify(config(long))), `gw.json: ${pointer}: must NOT have more than 253 characters`, pointer);
    t.notMatch(messageOf(JSON.stringify(config(fits))), pointer, `${pointer}: 253 characters are taken`);
  }
});

t.test('gateway check words a bad header name as one', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-pattern-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'gateway.json');
  writeFileSync(file, JSON.stringify({ port: 0, middleware: [{ id: 'a', type: 'apiKeyAuth', header: 'bad header:', keys: [] }] }));
  const { code, stderr } = await gateway('check', '--config', file);
  t.equal(code, 1);
  t.equal(stderr, `error: ${file}: /middleware/0/header: ${HEADER} (got "bad header:")\ngateway check: ${file} has 1 problem(s)\n`);
});

function messageOf(config: string): string {
  try {
    parseConfig(config, 'gw.json');
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  return '';
}

t.test('an enum key given another type: one line, with the allowed values', async (t) => {
  t.equal(
    messageOf('{"logLevel": 5, "encodedSlashes": null}'),
    'gw.json: /logLevel: must be one of "fatal", "error", "warn", "info", "debug", "trace", "silent" (got 5)\ngw.json: /encodedSlashes: must be one of "reject", "keep" (got null)',
  );
});

t.test('a number too large for a double is shown as the Infinity it became, not null', async (t) => {
  t.equal(messageOf('{"port": 1e999}'), 'gw.json: /port: must be an integer (got Infinity)');
  t.equal(messageOf('{"trustedProxies": [1e999]}'), 'gw.json: /trustedProxies/0: must be a string (got Infinity)');
});

t.test('gateway check names a UTF-16 file as one', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-utf16-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const text = '{"port": 8080}';
  const cases: Array<[string, Buffer, string]> = [
    ['le-bom', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]), 'little-endian, with a byte order mark'],
    ['le', Buffer.from(text, 'utf16le'), 'little-endian'],
    ['be', Buffer.from(text, 'utf16le').swap16(), 'big-endian'],
  ];
  for (const [name, bytes, order] of cases) {
    const file = join(dir, `${name}.json`);
    writeFileSync(file, bytes);
    const { code, stderr } = await gateway('check', '--config', file);
    t.equal(code, 1);
    t.equal(stderr, `error: ${file}: the file looks like UTF-16 (${order}); it must be UTF-8: save it as UTF-8 (or convert it: iconv -f UTF-16 -t UTF-8)\ngateway check: ${file} has 1 problem(s)\n`, name);
  }
  const utf8 = join(dir, 'utf8.json');
  writeFileSync(utf8, `\uFEFF${text}`);
  t.equal((await gateway('check', '--config', utf8)).code, 0, 'UTF-8, with or without its BOM, is read');
});
