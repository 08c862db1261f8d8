// `host` and `admin.host` are checked by their form when the config is loaded: an IP address or a host
// name. A value that is neither ("80", "a b", "256.1.1.1", "[::1]", control characters) passed
// `gateway check` and then failed `gateway start` with a getaddrinfo error. Whether a name resolves is
// still seen at start.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ConfigError, parseConfig } from '../../src/config/load.js';
import { gateway } from '../helpers/cli.js';

function problems(config: Record<string, unknown>): string[] {
  try {
    parseConfig(JSON.stringify(config), 'gw.json');
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return err.message.split('\n');
    throw err;
  }
}

const NEITHER = 'is neither an IP address nor a host name (e.g. "0.0.0.0", "::", "127.0.0.1" or "localhost")';

t.test('addresses and host names are accepted', async (t) => {
  for (const host of ['0.0.0.0', '127.0.0.1', '::', '::1', 'fe80::1%eth0', 'localhost', 'gateway.internal', 'example.com.', 'my_service', 'NaN']) {
    t.same(problems({ host, admin: { host, port: 9000 } }), [], host);
  }
});

t.test('anything else is refused, naming the field', async (t) => {
  for (const host of ['80', '256.1.1.1', '1.2.3', 'a b', 'a\u0000b', 'a\u0007', '-a', 'a..b', 'x'.repeat(64), `${'a.'.repeat(127)}a`]) {
    const shown = JSON.stringify(host).length > 60 ? `${JSON.stringify(host).slice(0, 57)}...` : JSON.stringify(host);
    t.same(problems({ host }), [`gw.json: /host: ${shown} ${NEITHER}`], JSON.stringify(host));
    t.same(problems({ admin: { host, port: 9000 } }), [`gw.json: /admin/host: ${shown} ${NEITHER}`]);
  }
  t.same(problems({ host: '[::1]' }), ['gw.json: /host: "[::1]": write an IPv6 address without brackets ("::1")']);
});

t.test('gateway check refuses a host that is not one, and start does too, before any getaddrinfo', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-host-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'gateway.json');
  writeFileSync(file, JSON.stringify({ port: 0, host: '256.1.1.1', workers: 1 }));
  const check = await gateway('check', '--config', file);
  t.equal(check.code, 1);
  t.equal(check.stderr, `error: ${file}: /host: "256.1.1.1" ${NEITHER}\ngateway check: ${file} has 1 problem(s)\n`);
  const start = await gateway('start', '--config', file);
  t.equal(start.code, 1);
  t.match(start.stderr, `${file}: /host: "256.1.1.1" ${NEITHER}`);
  t.notMatch(start.stderr, 'getaddrinfo');
});
