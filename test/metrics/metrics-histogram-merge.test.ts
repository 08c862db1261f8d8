// The primary's merge of worker histograms (addEncodedHistogram) against hdr-histogram-js's own
// decode + add, which it replaces on the fast path: same counts, same percentiles, for any latencies.
import t, { type Test } from 'tap';
import fc from 'fast-check';
import * as hdr from 'hdr-histogram-js';
import type { Histogram } from 'hdr-histogram-js';
import {
  addEncodedHistogram,
  clampLatency,
  decodeHistogram,
  encodeHistogram,
  histogramSettings,
  MAX_LATENCY_MICROS,
  webAssemblyReady,
  type Precision,
} from '../../src/metrics/histogram.js';

const SEED = Number(process.env.MERGE_SEED ?? Math.floor(Math.random() * 2 ** 31));
const PERCENTILES = [0, 1, 25, 50, 75, 90, 99, 99.9, 99.99, 100];

t.ok(webAssemblyReady(), 'the WebAssembly build loads (workers record with it)');

function recorded(precision: Precision, wasm: boolean, values: readonly number[]): Histogram {
  const h = hdr.build(histogramSettings(precision, wasm));
  for (const v of values) h.recordValue(clampLatency(v));
  return h;
}

function sameDistribution(t: Test, got: Histogram, want: Histogram, label: string): void {
  t.equal(got.totalCount, want.totalCount, `${label}: total count`);
  for (const p of PERCENTILES) t.equal(got.getValueAtPercentile(p), want.getValueAtPercentile(p), `${label}: p${p}`);
}

// Latencies as a gateway sees them: mostly small, some huge, the range's ends included.
const latency = fc.oneof(
  fc.integer({ min: 0, max: 2_000 }),
  fc.integer({ min: 0, max: 200_000 }),
  fc.integer({ min: 0, max: MAX_LATENCY_MICROS + 10 }),
  fc.constantFrom(0, 1, 2, 127, 128, 2047, 2048, MAX_LATENCY_MICROS - 1, MAX_LATENCY_MICROS),
);
// Several deltas of one series, each from one worker or the other recorder kind.
const deltas = fc.array(fc.record({ wasm: fc.boolean(), values: fc.array(latency, { minLength: 0, maxLength: 300 }) }), { minLength: 1, maxLength: 6 });

t.test(`merged deltas equal hdr-histogram-js's decode + add (seed ${SEED}; MERGE_SEED=${SEED} replays)`, async (t) => {
  let fastPath = 0;
  let slowPath = 0;
  fc.assert(
    fc.property(fc.constantFrom<Precision>(2, 3), deltas, (precision, parts) => {
      const merged = hdr.build(histogramSettings(precision, false));
      const reference = hdr.build(histogramSettings(precision, false));
      for (const part of parts) {
        if (part.values.length === 0) continue;
        const encoded = encodeHistogram(recorded(precision, part.wasm, part.values));
        if (part.wasm) fastPath++;
        else slowPath++;
        addEncodedHistogram(merged, encoded);
        reference.add(decodeHistogram(encoded));
      }
      if (merged.totalCount !== reference.totalCount) return false;
      return PERCENTILES.every((p) => merged.getValueAtPercentile(p) === reference.getValueAtPercentile(p));
    }),
    { seed: SEED, numRuns: 150 },
  );
  t.ok(fastPath > 0 && slowPath > 0, `both paths were taken (raw V2 from WebAssembly: ${fastPath}, compressed from JS: ${slowPath})`);
});

/** The JsHistogram members the comparison below reads (public in hdr-histogram-js, not in its Histogram type). */
interface Buckets {
  readonly countsArrayLength: number;
  readonly maxValue: number;
  readonly minNonZeroValue: number;
  getCountAtIndex(index: number): number;
  valueFromIndex(index: number): number;
}

/** The library's own record path: one recordValueWithCount per non-empty bucket of each decoded delta. */
function bucketByBucket(precision: Precision, encoded: readonly string[]): Histogram {
  const reference = hdr.build(histogramSettings(precision, false));
  for (const e of encoded) {
    const decoded = decodeHistogram(e) as unknown as Buckets;
    for (let i = 0; i < decoded.countsArrayLength; i++) {
      const count = decoded.getCountAtIndex(i);
      if (count > 0) reference.recordValueWithCount(decoded.valueFromIndex(i), count);
    }
  }
  return reference;
}

/** Every count, the total, and the min/max the histogram tracks. */
function sameBuckets(a: Histogram, b: Histogram): boolean {
  const got = a as unknown as Buckets;
  const want = b as unknown as Buckets;
  if (a.totalCount !== b.totalCount || got.maxValue !== want.maxValue || got.minNonZeroValue !== want.minNonZeroValue) return false;
  for (let i = 0; i < got.countsArrayLength; i++) if (got.getCountAtIndex(i) !== want.getCountAtIndex(i)) return false;
  return true;
}

t.test(`the fast path adds by index what recording every bucket's value would add (seed ${SEED})`, async (t) => {
  fc.assert(
    fc.property(fc.constantFrom<Precision>(2, 3), deltas, (precision, parts) => {
      const merged = hdr.build(histogramSettings(precision, false));
      const encoded = parts.filter((part) => part.values.length > 0).map((part) => encodeHistogram(recorded(precision, true, part.values)));
      for (const e of encoded) addEncodedHistogram(merged, e);
      return sameBuckets(merged, bucketByBucket(precision, encoded));
    }),
    { seed: SEED, numRuns: 100 },
  );
  // The value 0 (bucket 0), alone and beside others: min/max tracking skips it, as recording does.
  for (const values of [[0], [0, 0, 7], [0, 300, 5_000_000], [1, 2, 3]]) {
    const encoded = encodeHistogram(recorded(3, true, values));
    const merged = hdr.build(histogramSettings(3, false));
    addEncodedHistogram(merged, encoded);
    t.ok(sameBuckets(merged, bucketByBucket(3, [encoded])), `values ${values.join(', ')}`);
  }
});

t.test('every bucket of both precisions lands where the reference puts it', async (t) => {
  for (const precision of [2, 3] as const) {
    // One value per bucket boundary region: each power of two and its neighbours, up to the range's top.
    const values: number[] = [];
    for (let v = 1; v <= MAX_LATENCY_MICROS; v *= 2) values.push(v - 1, v, v + 1, Math.floor(v * 1.5));
    values.push(MAX_LATENCY_MICROS);
    const encoded = encodeHistogram(recorded(precision, true, values));
    const merged = hdr.build(histogramSettings(precision, false));
    addEncodedHistogram(merged, encoded);
    addEncodedHistogram(merged, encoded);
    const reference = hdr.build(histogramSettings(precision, false));
    reference.add(decodeHistogram(encoded));
    reference.add(decodeHistogram(encoded));
    sameDistribution(t, merged, reference, `precision ${precision}`);
    t.equal(merged.totalCount, 2 * values.length);
  }
});

t.test('a delta recorded with other settings still merges (the library path)', async (t) => {
  const values = [5, 50, 500, 5_000, 50_000, 500_000];
  const encoded = encodeHistogram(recorded(3, true, values));
  const merged = hdr.build(histogramSettings(2, false));
  addEncodedHistogram(merged, encoded);
  const reference = hdr.build(histogramSettings(2, false));
  reference.add(decodeHistogram(encoded));
  sameDistribution(t, merged, reference, '3 digits into 2');
});

/** A raw V2 encoding whose payload is `payload` (header taken from a real one). */
function withPayload(precision: Precision, payload: number[]): string {
  const real = Buffer.from(encodeHistogram(recorded(precision, true, [10])), 'base64');
  const header = Buffer.from(real.subarray(0, 40));
  header.writeInt32BE(payload.length, 4);
  return Buffer.concat([header, Buffer.from(payload)]).toString('base64');
}

t.test('a malformed raw encoding is refused before anything is added', async (t) => {
  const target = hdr.build(histogramSettings(2, false));
  addEncodedHistogram(target, encodeHistogram(recorded(2, true, [100, 200])));
  t.equal(target.totalCount, 2);
  // A count of 1 (ZigZag 2) at index 0, then a LEB128 number whose continuation bit runs off the end.
  t.throws(() => addEncodedHistogram(target, withPayload(2, [2, 0x82])), /cut short/);
  // A run of 2^20 empty buckets (ZigZag 2^21 - 1), then a count: far past the 2,560 buckets.
  t.throws(() => addEncodedHistogram(target, withPayload(2, [2, 0xff, 0xff, 0x7f, 2])), /past the histogram's range/);
  t.equal(target.totalCount, 2, 'the count of 1 read before each fault was not added');
  // A payload length beyond the bytes present (hdr-histogram-js's decoder would read past the end and count it).
  const long = Buffer.from(withPayload(2, [2]), 'base64');
  long.writeInt32BE(1000, 4);
  t.throws(() => addEncodedHistogram(target, long.toString('base64')), /shorter than its payload length/);
  t.equal(target.totalCount, 2);
});
