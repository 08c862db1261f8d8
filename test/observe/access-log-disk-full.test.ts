// An access log file on a disk that fills up, through the real gateway process: one error line when
// writing stops, the health report's listeners say "failing", the dropped lines are counted in
// /metrics; once there is room again writing resumes by itself (no SIGUSR1), said once, and a line
// the full disk cut short does not swallow the next one. A small tmpfs is the full disk when the
// test may mount one (root); /dev/full, behind a symbolic link the test repoints, otherwise too. A
// SIGUSR1 reopen that fails logs its reason, not a stack.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig, type GatewayProcess } from '../helpers/gateway-process.js';
import { parsePrometheus, sampleValue } from '../helpers/prometheus.js';

const endpoints = [{ method: 'GET', path: '/items/{id}' }];
const upstream = await startUpstream(t, { name: 'app' });

function tempDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-disk-full-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function start(t: Test, destination: string): Promise<GatewayProcess> {
  return startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints }], { accessLog: { enabled: true, destination } }),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
}

async function requests(gateway: GatewayProcess, prefix: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    const answer = await httpRequest(gateway.port, `/items/${prefix}-${i}`);
    if (answer.status !== 200) throw new Error(`/items/${prefix}-${i}: ${answer.status}`);
  }
}

async function listeners(gateway: GatewayProcess): Promise<Record<string, string[]>> {
  return (JSON.parse((await httpRequest(gateway.port, '/healthcheck')).body) as { listeners: Record<string, string[]> }).listeners;
}

async function failingInHealth(t: Test, gateway: GatewayProcess): Promise<void> {
  const states = await eventually(async () => ((await listeners(gateway)).failing !== undefined ? listeners(gateway) : undefined), 5000, 50, 'listeners.failing in /healthcheck');
  t.same(states, { pending: [], ready: [], failing: ['accessLog'] }, '/healthcheck: the access log is failing, not ready');
}

/** The dropped-lines counter in /metrics, JSON and Prometheus, once both say the same and it is at least `atLeast`. */
async function droppedLines(gateway: GatewayProcess, atLeast = 0): Promise<number> {
  return eventually(
    async () => {
      const json = JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as { accessLog?: { droppedLines?: number } };
      const text = (await httpRequest(gateway.port, '/metrics', { headers: { accept: 'text/plain' } })).body;
      const prometheus = sampleValue(parsePrometheus(text), 'gateway_access_log_dropped_lines_total', 'gateway_access_log_dropped_lines_total', {});
      return json.accessLog?.droppedLines !== undefined && json.accessLog.droppedLines === prometheus && prometheus >= atLeast ? prometheus : undefined;
    },
    5000,
    100,
    'accessLog.droppedLines and gateway_access_log_dropped_lines_total',
  );
}

const stopped = (l: Record<string, unknown>) => typeof l.msg === 'string' && l.msg.startsWith('access log: writing to ') && l.msg.includes(' failed (ENOSPC)');
const resumed = (l: Record<string, unknown>) => typeof l.msg === 'string' && /^access log: writing to .* works again; \d+ lines dropped meanwhile$/.test(l.msg);

/** A tmpfs of `size` mounted on a fresh directory, or why it cannot be. */
function mountTmpfs(t: Test, size: string): string | Error {
  const dir = tempDir(t);
  const mountPoint = join(dir, 'disk');
  mkdirSync(mountPoint);
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', mountPoint], { stdio: 'pipe' });
  } catch (err) {
    const stderr = (err as { stderr?: Buffer }).stderr?.toString().trim();
    return new Error(stderr || (err as Error).message);
  }
  t.teardown(() => {
    execFileSync('umount', ['-l', mountPoint], { stdio: 'pipe' });
  });
  return mountPoint;
}

const tmpfsProbe = mkdtempSync(join(tmpdir(), 'specgate-mount-probe-'));
let cannotMount: string | false = false;
try {
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', tmpfsProbe], { stdio: 'pipe' });
  execFileSync('umount', [tmpfsProbe], { stdio: 'pipe' });
} catch (err) {
  cannotMount = `cannot mount a tmpfs here (${(err as { stderr?: Buffer }).stderr?.toString().trim() || (err as Error).message}); the /dev/full test below covers all but the cut line`;
}
rmSync(tmpfsProbe, { recursive: true, force: true });

t.test('a full disk (tmpfs): stops once, failing in health, drops counted; room again: resumes by itself, no line glued to a cut one', { skip: cannotMount }, async (t) => {
  const disk = mountTmpfs(t, '64k');
  if (disk instanceof Error) throw disk;
  const logFile = join(disk, 'access.log');
  const gateway = await start(t, logFile);
  // Leave room for some lines, not for all the requests below (each line is about 300 bytes).
  const filler = join(disk, 'filler');
  writeFileSync(filler, Buffer.alloc(40 * 1024));
  await requests(gateway, 'fill', 150);
  const stop = await gateway.waitForLog(stopped, 5000, 'the line saying writing stopped');
  t.equal(stop.level, 50);
  t.match(stop.msg, 'lines are dropped until it works again');
  await failingInHealth(t, gateway);
  const dropped = await droppedLines(gateway, 1);
  t.pass(`${dropped} dropped lines counted`);
  await requests(gateway, 'still-full', 20);
  t.equal(gateway.lines.filter(stopped).length, 1, 'said once, not per retry or per line');

  rmSync(filler);
  await requests(gateway, 'room', 5);
  const resume = await eventually(
    async () => {
      await requests(gateway, 'poke', 1);
      return gateway.lines.find(resumed);
    },
    15_000,
    200,
    'the line saying writing works again',
  );
  t.match(resume, { level: 30, msg: /lines dropped meanwhile$/ });
  t.equal(gateway.lines.filter(resumed).length, 1, 'said once');
  t.notOk((await eventually(async () => ((await listeners(gateway)).failing === undefined ? await listeners(gateway) : undefined), 5000)).failing);
  t.ok((await listeners(gateway)).ready!.includes('accessLog'), 'ready again');
  await requests(gateway, 'after', 20);
  gateway.signal('SIGTERM');
  t.same(await gateway.exited, { code: 0, signal: null });

  const lines = readFileSync(logFile, 'utf8').split('\n').filter((line) => line !== '');
  const unparsable = lines.filter((line) => {
    try {
      JSON.parse(line);
      return false;
    } catch {
      return true;
    }
  });
  t.ok(unparsable.length <= 1, `at most the one line the full disk cut short does not parse (${unparsable.length})`);
  t.notOk(lines.some((line) => line.indexOf('{"level"', 1) > 0), 'no line has a second record glued to it');
  const after = lines.filter((line) => line.includes('"path":"/items/after-'));
  t.equal(after.length, 20, 'every request after the resume has its line');
});

t.test('/dev/full behind a link: stops once and keeps retrying quietly; the link pointed at a file: resumes without SIGUSR1', async (t) => {
  const dir = tempDir(t);
  const link = join(dir, 'access.log');
  symlinkSync('/dev/full', link);
  const gateway = await start(t, link);
  await requests(gateway, 'full', 10);
  await gateway.waitForLog(stopped, 5000, 'the line saying writing stopped');
  await failingInHealth(t, gateway);
  // Retried every few seconds, each retry failing again: still one line.
  for (let i = 0; i < 8; i++) {
    await requests(gateway, `retrying-${i}`, 3);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  t.equal(gateway.lines.filter(stopped).length, 1, 'one line over several failed retries');
  // 34 requests, and the built-in ones of the test (logged too).
  const dropped = await droppedLines(gateway, 34);
  t.pass(`${dropped} dropped lines counted`);

  const real = join(dir, 'real.log');
  writeFileSync(real, '');
  symlinkSync(real, `${link}.new`);
  renameSync(`${link}.new`, link);
  const resume = await eventually(
    async () => {
      await requests(gateway, 'poke', 1);
      return gateway.lines.find(resumed);
    },
    15_000,
    200,
    'the line saying writing works again',
  );
  t.same((await eventually(async () => ((await listeners(gateway)).failing === undefined ? await listeners(gateway) : undefined), 5000)).ready, ['accessLog']);
  // Writing broke before any line was dropped, so the resume line's count is every line dropped. The
  // worker ships its count to the primary every 200 ms: wait for /metrics to say exactly that much,
  // not for the first value at least as high as before (which may predate the last pokes' drops).
  const droppedInAll = Number(/; (\d+) lines dropped meanwhile$/.exec(resume.msg as string)![1]);
  t.ok(droppedInAll >= dropped, `${droppedInAll} dropped in all (the pokes before the retry included)`);
  t.equal(await droppedLines(gateway, droppedInAll), droppedInAll, '/metrics counts the lines the resume line says were dropped');
  await requests(gateway, 'after', 5);
  t.notOk(gateway.lines.some((l) => l.msg === 'SIGUSR1: workers reopen their log files'), 'no SIGUSR1 was needed');
  await eventually(async () => (readFileSync(real, 'utf8').split('\n').filter((line) => line.includes('/items/after-')).length === 5 ? true : undefined), 5000, 100, 'the new lines in the file');
  // "Did not happen": a few ship intervals for a drop that should not be there.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  t.equal(await droppedLines(gateway), droppedInAll, 'nothing dropped once it writes');
});

t.test('a reopen that fails logs its reason, not a stack', async (t) => {
  const dir = tempDir(t);
  const logDir = join(dir, 'logs');
  mkdirSync(logDir);
  const gateway = await start(t, join(logDir, 'access.log'));
  rmSync(logDir, { recursive: true, force: true });
  gateway.signal('SIGUSR1');
  const line = await gateway.waitForLog((l) => typeof l.msg === 'string' && l.msg.startsWith('could not reopen the access log'), 5000, 'the reopen error');
  t.match(line, { level: 50, msg: /^could not reopen the access log: cannot open .*access\.log for appending: ENOENT$/, reason: /ENOENT/ });
  t.notOk('err' in line, 'no error object');
  t.notMatch(JSON.stringify(line), /\n\s+at /, 'no stack trace');
});
