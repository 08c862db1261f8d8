// node dist/bench/request-id.js — what making a request ID costs: the gateway's per-process prefix
// plus counter against crypto.randomUUID(), and the trace ids drawn per request (randomHex), in ns per
// id. Alternating rounds, median reported; a ratio within one run is what to read.
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { nextRequestId } from '../src/observe/request-id.js';
import { randomHex } from '../src/observe/random-hex.js';

const N = Number(process.env.BENCH_IDS ?? 2_000_000);
const ROUNDS = 5;
let sink = 0;

function measure(make: () => string): number {
  const started = performance.now();
  for (let i = 0; i < N; i++) sink += make().length;
  return ((performance.now() - started) * 1e6) / N;
}

const runs: Record<string, number[]> = { nextRequestId: [], randomUUID: [], 'randomHex(32)': [] };
for (let round = 0; round < ROUNDS; round++) {
  runs.nextRequestId!.push(measure(nextRequestId));
  runs.randomUUID!.push(measure(randomUUID));
  runs['randomHex(32)']!.push(measure(() => randomHex(32)));
}
const median = (values: number[]): number => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
for (const [name, values] of Object.entries(runs)) console.log(`${name.padEnd(16)} ${median(values).toFixed(1)} ns/id`);
console.log(`nextRequestId / randomUUID: ${(median(runs.nextRequestId!) / median(runs.randomUUID!)).toFixed(2)}x (${N} ids x ${ROUNDS} rounds; ${sink > 0 ? 'ok' : ''})`);
