// gateway hash-key: the digest apiKeyAuth compares with, read from stdin only.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import t from 'tap';
import { MAIN } from '../helpers/gateway-process.js';
import { untapped } from '../helpers/untapped.js';

const run = (args: string[], input: string) => spawnSync(...untapped(process.execPath, [MAIN, ...args]), { input, encoding: 'utf8' });

t.test('prints the SHA-256 of the key on stdin, one trailing newline dropped', async (t) => {
  const expected = createHash('sha256').update('s3cr3t key').digest('hex');
  for (const input of ['s3cr3t key', 's3cr3t key\n', 's3cr3t key\r\n']) {
    const res = run(['hash-key'], input);
    t.equal(res.status, 0);
    t.equal(res.stdout, `${expected}\n`, JSON.stringify(input));
  }
});

t.test('no key, or a key on the command line: refused', async (t) => {
  t.equal(run(['hash-key'], '').status, 1);
  const res = run(['hash-key', 's3cr3t'], '');
  t.equal(res.status, 2);
  t.match(res.stderr, /never from the command line/);
});
