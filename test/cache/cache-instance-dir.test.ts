// The instance's cache directory as the primary makes it (src/cache/instance-dir.ts), in this process
// with a temporary directory of its own: a start removes the directories of primaries no longer
// running and any named with its own pid (a killed primary's pid reused), and keeps those of running
// ones; check() finds LMDB's lock file replaced and moves to a new directory.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { CACHE_DIR_ENV, createInstanceCacheDir } from '../../src/cache/instance-dir.js';
import { untapped } from '../helpers/untapped.js';

const outer = mkdtempSync(join(tmpdir(), 'specgate-instance-dir-test-'));
const savedTmp = process.env.TMPDIR;
process.env.TMPDIR = outer;
t.teardown(() => {
  if (savedTmp === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = savedTmp;
  rmSync(outer, { recursive: true, force: true });
});

t.test('a start sweeps the dead and its own pid, keeps the living, and check() moves on a replaced lock file', async (t) => {
  t.equal(tmpdir(), outer, 'os.tmpdir() follows TMPDIR');
  const exited = spawnSync(...untapped(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']), { encoding: 'utf8' });
  const deadPid = Number(exited.stdout);
  const dirs = {
    dead: join(outer, `specgate-cache-${deadPid}-aaaaaa`),
    ownPid: join(outer, `specgate-cache-${process.pid}-bbbbbb`),
    living: join(outer, `specgate-cache-${process.ppid}-cccccc`),
    other: join(outer, 'specgate-cachet-1-dddddd'),
  };
  for (const dir of Object.values(dirs)) {
    mkdirSync(dir);
    writeFileSync(join(dir, 'data.mdb'), 'x');
  }

  const instance = createInstanceCacheDir();
  t.notOk(existsSync(dirs.dead), "a dead primary's directory is removed");
  t.notOk(existsSync(dirs.ownPid), 'one named with this pid is removed: it is not this primary\'s');
  t.ok(existsSync(dirs.living), "a running primary's directory is kept");
  t.ok(existsSync(dirs.other), 'a name that only starts alike is not touched');
  t.match(instance.path, new RegExp(`^${outer}/specgate-cache-${process.pid}-`));
  t.same(readdirSync(instance.path).sort(), ['data.mdb', 'lock.mdb'], "LMDB's two files, made by the primary");
  t.equal(process.env[CACHE_DIR_ENV], instance.path, 'workers forked from now on are told where');
  t.equal(instance.check(), null, 'untouched: no move');

  const was = instance.path;
  rmSync(join(was, 'lock.mdb'));
  writeFileSync(join(was, 'lock.mdb'), '');
  const move = instance.check();
  t.equal(move?.was, was, 'the lock file replaced (another inode): a move');
  t.not(move?.now, was);
  t.notOk(existsSync(was), 'the old directory is removed');
  t.equal(process.env[CACHE_DIR_ENV], move?.now);
  t.equal(instance.check(), null, 'the new one is intact');
});
