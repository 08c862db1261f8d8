// The mismatch log's file: several processes append to one file at once (as every worker does) and
// every line comes out whole; what waits to be written is bounded.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { openAppendLog } from '../../src/listeners/append-log.js';
import { MAX_LINE_BYTES } from '../../src/listeners/mismatch-line.js';
import { untapped } from '../helpers/untapped.js';

const dir = mkdtempSync(join(tmpdir(), 'specgate-append-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const moduleUrl = new URL('../../src/listeners/append-log.js', import.meta.url).href;

const WRITERS = 4;
/**
 * A writer's whole output (about 2.1 KB a line on average) stays well under the log's 1 MiB queue
 * bound, so no line is dropped however slowly the disk takes them: with 500 lines it was about the
 * bound itself, and a loaded CI machine saw a writer drop one (the drop path has its own test below).
 */
const LINES = 250;

/** A child process appending LINES lines of 100..4000 bytes, each saying who wrote it and how long it is. */
function writer(path: string, writerId: number): Promise<number> {
  const script = `
    import { openAppendLog } from ${JSON.stringify(moduleUrl)};
    const log = openAppendLog(${JSON.stringify(path)}, (err) => { console.error(err); process.exit(2); });
    await log.ready;
    let dropped = 0;
    for (let i = 0; i < ${LINES}; i++) {
      const pad = 'x'.repeat(100 + ((i * 7919 + ${writerId} * 104729) % 3900));
      if (!log.append(JSON.stringify({ writer: ${writerId}, i, length: pad.length, pad }) + '\\n')) dropped++;
      // Let writes go out between bursts, so the processes' writes overlap in time.
      if (i % 50 === 49) await new Promise((resolve) => setImmediate(resolve));
    }
    await log.close();
    process.exit(dropped === 0 ? 0 : 3);
  `;
  return new Promise((resolve) => {
    const child = spawn(...untapped(process.execPath, ['--input-type=module', '-e', script]), { stdio: ['ignore', 'inherit', 'inherit'] });
    child.on('exit', (code) => resolve(code ?? -1));
  });
}

t.test('lines appended by several processes at once come out whole', async (t) => {
  const path = join(dir, 'shared.jsonl');
  const codes = await Promise.all(Array.from({ length: WRITERS }, (_, id) => writer(path, id)));
  t.same(codes, Array(WRITERS).fill(0), 'every writer wrote every line');
  const lines = readFileSync(path, 'utf8').split('\n');
  t.equal(lines.pop(), '', 'the file ends with a newline');
  t.equal(lines.length, WRITERS * LINES);
  const seen = new Map<number, Set<number>>();
  let whole = 0;
  for (const line of lines) {
    const parsed = JSON.parse(line) as { writer: number; i: number; length: number; pad: string };
    if (parsed.pad.length === parsed.length && /^x*$/.test(parsed.pad)) whole++;
    let indexes = seen.get(parsed.writer);
    if (indexes === undefined) seen.set(parsed.writer, (indexes = new Set()));
    indexes.add(parsed.i);
  }
  t.equal(whole, WRITERS * LINES, 'no line was cut or interleaved');
  for (let id = 0; id < WRITERS; id++) t.equal(seen.get(id)?.size, LINES, `writer ${id}: every line once`);
});

t.test('what waits to be written is bounded: past it, lines are dropped and the caller told', async (t) => {
  const path = join(dir, 'bounded.jsonl');
  const log = openAppendLog(path, () => {});
  const line = JSON.stringify({ pad: 'y'.repeat(MAX_LINE_BYTES - 20) }) + '\n';
  let accepted = 0;
  // Synchronously: nothing is written meanwhile, so the queue alone decides.
  for (let i = 0; i < 1000; i++) if (log.append(line)) accepted++;
  t.ok(accepted > 200 && accepted < 300, `about 1 MiB queued (${accepted} lines of ${line.length} bytes)`);
  t.notOk(log.append('x'.repeat(MAX_LINE_BYTES) + '\n'), 'a line over the bound is refused');
  await log.close();
  const lines = readFileSync(path, 'utf8').split('\n').filter((l) => l !== '');
  t.equal(lines.length, accepted, 'every accepted line was written before close resolved');
  t.notOk(log.append(line), 'nothing is accepted after close');
});
