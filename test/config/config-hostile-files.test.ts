// Files a config names, and values it holds, that must not take the process with them: a config that
// is a device or a FIFO, a PEM file that is /dev/zero (read whole, memory grew by gigabytes; a FIFO
// never ended), and `${` repeated without a closing brace (each one scanned to the end of the text).
// Each is a config error naming the file or the pointer, at once.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ConfigError, loadConfig, parseConfig } from '../../src/config/load.js';
import { substituteEnv } from '../../src/config/substitute.js';

const dir = mkdtempSync(join(tmpdir(), 'config-hostile-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function refusal(load: () => unknown): ConfigError {
  try {
    load();
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error('the config was accepted');
}

t.test('a config that is a device or a FIFO is refused, not read', async (t) => {
  const zero = refusal(() => loadConfig('/dev/zero'));
  t.match(zero.message, /\/dev\/zero.*not a regular file/);
  const fifo = join(dir, 'gw.fifo');
  execFileSync('mkfifo', [fifo]);
  t.match(refusal(() => loadConfig(fifo)).message, /not a regular file/, 'a FIFO with no writer: refused at once');
});

t.test('an upstream tls.caFile that is /dev/zero is a problem at its pointer', async (t) => {
  const file = join(dir, 'gw.json');
  writeFileSync(file, JSON.stringify({ upstreams: [{ serviceType: 'static', serviceLocation: 'https://127.0.0.1:1', endpoints: [{ method: 'GET', path: '/a' }], tls: { caFile: '/dev/zero' } }] }));
  const error = refusal(() => loadConfig(file));
  t.match(error.message, /\/upstreams\/0\/tls\/caFile.*not a regular file/);
});

t.test('"${" repeated without a closing brace: the time grows with the text, not its square', async (t) => {
  const timed = (n: number): number => {
    const text = JSON.stringify({ name: '${'.repeat(n), upstreams: [] });
    const started = performance.now();
    try {
      parseConfig(text, 'gw.json', {});
    } catch {
      // Whatever the verdict on the name: only the time is measured here.
    }
    return performance.now() - started;
  };
  timed(1000);
  const small = timed(20_000);
  const large = timed(80_000);
  t.ok(large / small < 9, `80,000 against 20,000: ${(large / small).toFixed(1)}x the time (quadratic would be 16x)`);
  t.same(substituteEnv({ x: 'a$${b', y: '${A}$${c', z: '${' }, { A: 'v' }).value, { x: 'a${b', y: 'v${c', z: '${' }, '"$${" after the last "}" is still a literal "${"');
});
