import { Buffer } from 'node:buffer';
import * as hdr from './hdr.js';
import type { Histogram } from './hdr.js';

/** Latencies are recorded in microseconds; a `le` bound of the exposition is at most this (60 s). */
export const MAX_LATENCY_MICROS = 60_000_000;

/**
 * The histograms' highest trackable value, 2^26 - 1 µs (67.1 s): their counts arrays are as long as
 * with 60 s (both need the same powers of two, at 2 and at 3 digits), and the HDR bucket holding it
 * lies above the bucket of every bound up to 60 s. A longer latency is recorded in the histogram as
 * this value, so only `+Inf` counts it; the sums and maxima beside the histograms keep it exact.
 */
export const HIGHEST_RECORDED_MICROS = 2 ** 26 - 1;

/**
 * Significant digits: 3 for the overall histogram; 2 (1 % precision) per upstream and per endpoint, where
 * a 3-digit histogram (~70 KB of counts) per endpoint would cost too much memory and per-delta work.
 */
export type Precision = 2 | 3;

export function histogramSettings(precision: Precision, useWebAssembly: boolean) {
  return {
    bitBucketSize: 32,
    autoResize: false,
    lowestDiscernibleValue: 1,
    highestTrackableValue: HIGHEST_RECORDED_MICROS,
    numberOfSignificantValueDigits: precision,
    useWebAssembly,
  } as const;
}

let webAssemblyState: 'unknown' | 'ready' | 'unavailable' = 'unknown';

/** Loads hdr-histogram-js's WebAssembly build once; false where WebAssembly cannot be used. */
export function webAssemblyReady(): boolean {
  if (webAssemblyState === 'unknown') {
    try {
      hdr.initWebAssemblySync();
      webAssemblyState = 'ready';
    } catch {
      webAssemblyState = 'unavailable';
    }
  }
  return webAssemblyState === 'ready';
}

/**
 * Rounds up to whole microseconds (0 for anything not positive): the value sums and maxima keep.
 * Rounding up keeps "took at most B µs" true of the recorded value exactly when it is true of the
 * measured one, which the Prometheus buckets rely on (see buckets.ts).
 */
export function roundLatency(micros: number): number {
  return micros > 0 ? Math.ceil(micros) : 0;
}

/** roundLatency(), then clamped into the histograms' trackable range (out-of-range values would throw). */
export function clampLatency(micros: number): number {
  const rounded = roundLatency(micros);
  return rounded < HIGHEST_RECORDED_MICROS ? rounded : HIGHEST_RECORDED_MICROS;
}

const RAW_V2_COOKIE = 0x1c849313;

/** JSON-safe encoding: raw V2 encoding from WebAssembly histograms (cheap), compressed V2 from JS ones. */
export function encodeHistogram(histogram: Histogram): string {
  if (histogram instanceof hdr.WasmHistogram) return Buffer.from(histogram.encode()).toString('base64');
  return hdr.encodeIntoCompressedBase64(histogram);
}

type DecodeRaw = (data: Uint8Array, bitBucketSize: number, minBarForHighestTrackableValue: number) => Histogram;

/** Decodes either form of encodeHistogram() into a JS histogram (the primary never records, so no WebAssembly). */
export function decodeHistogram(encoded: string): Histogram {
  const bytes = Buffer.from(encoded, 'base64');
  if (bytes.length >= 4 && bytes.readInt32BE(0) === RAW_V2_COOKIE) {
    const decode = (hdr.JsHistogram as unknown as { decode: DecodeRaw }).decode;
    return decode(bytes, 32, 0);
  }
  return hdr.decodeFromCompressedBase64(encoded, 32, false);
}

/** Raw V2 header: cookie, payload length, normalizing offset, digits (int32 each), lowest, highest, ratio (64-bit each). */
const RAW_V2_HEADER_BYTES = 40;

/**
 * Adds an encodeHistogram() string into `target`, a JS histogram (the primary's; hdr.build with
 * useWebAssembly false), which must have the settings the encoder had.
 *
 * The fast path walks the raw V2 payload (ZigZag LEB128 counts, a negative number being a run of
 * empty buckets) and adds each non-empty bucket where it lies: the cost follows the buckets that
 * hold values, a few dozen for a 200 ms delta of one endpoint. decodeHistogram() + add() would
 * build and scan a whole counts array (2,560 buckets at 2 digits, 17,408 at 3) for each delta of
 * each series: with a thousand busy endpoints that took the primary 20-90 ms per worker delta.
 * Anything else (the compressed form of JS histograms, other settings) takes the library's path.
 */
export function addEncodedHistogram(target: Histogram, encoded: string): void {
  const bytes = Buffer.from(encoded, 'base64');
  if (!addRawV2(target, bytes)) target.add(decodeHistogram(encoded));
}

function addRawV2(target: Histogram, bytes: Buffer): boolean {
  if (bytes.length < RAW_V2_HEADER_BYTES || bytes.readInt32BE(0) !== RAW_V2_COOKIE) return false;
  const payloadEnd = RAW_V2_HEADER_BYTES + bytes.readInt32BE(4);
  // hdr-histogram-js's decoder would read past the end (and count what it finds there): refused here.
  if (payloadEnd > bytes.length || payloadEnd < RAW_V2_HEADER_BYTES) throw new Error('metrics histogram: the raw V2 encoding is shorter than its payload length says');
  const buckets = target as unknown as JsBuckets;
  // The normalizing index offset (bytes 8-11) is ignored, as hdr-histogram-js's own decoder does.
  if (
    bytes.readInt32BE(12) !== target.numberOfSignificantValueDigits ||
    Number(bytes.readBigInt64BE(16)) !== buckets.lowestDiscernibleValue ||
    Number(bytes.readBigInt64BE(24)) !== target.highestTrackableValue
  ) {
    return false;
  }
  // Read every bucket first: a malformed encoding throws before anything is added.
  const length = buckets.countsArrayLength;
  const found = bucketScratch;
  found.length = 0;
  let index = 0;
  let p = RAW_V2_HEADER_BYTES;
  while (p < payloadEnd) {
    // ZigZag LEB128 of at most 9 bytes; counts stay far below 2^53, so plain arithmetic is exact.
    let byte = bytes[p++]!;
    let value = byte & 0x7f;
    let scale = 128;
    while (byte & 0x80) {
      if (p >= payloadEnd || scale > 2 ** 56) throw new Error('metrics histogram: a count of the raw V2 encoding is cut short');
      byte = bytes[p++]!;
      value += (byte & 0x7f) * scale;
      scale *= 128;
    }
    const count = value % 2 === 0 ? value / 2 : -(value + 1) / 2;
    if (count < 0) {
      index -= count;
      continue;
    }
    if (index >= length) throw new Error('metrics histogram: the raw V2 encoding counts past the histogram\'s range');
    if (count > 0) found.push(index, count);
    index++;
  }
  // Straight into the counts by index (the encoder's index is the target's: same settings), then the
  // total and min/max once: what recordValueWithCount(valueFromIndex(i), count) per bucket would do,
  // which maps each value back to its index (a 200 ms delta of a busy 3-digit series holds a couple
  // of thousand buckets: 815 µs that way, 60 µs this way).
  let total = 0;
  for (let i = 0; i < found.length; i += 2) {
    buckets.addToCountAtIndex(found[i]!, found[i + 1]!);
    total += found[i + 1]!;
  }
  if (found.length > 0) {
    buckets.addToTotalCount(total);
    buckets.updateMinAndMax(buckets.valueFromIndex(found[found.length - 2]!));
    // The smallest non-zero value: bucket 0 holds the value 0, which min/max tracking skips.
    for (let i = 0; i < found.length && i < 4; i += 2) {
      const value = buckets.valueFromIndex(found[i]!);
      buckets.updateMinAndMax(value);
      if (value !== 0) break;
    }
  }
  return true;
}

/** (bucket index, count) pairs of the encoding being added. */
const bucketScratch: number[] = [];

/** The JsHistogram members addRawV2 relies on (public in hdr-histogram-js's JsHistogram, not in its Histogram interface). */
interface JsBuckets {
  readonly lowestDiscernibleValue: number;
  readonly countsArrayLength: number;
  valueFromIndex(index: number): number;
  addToCountAtIndex(index: number, count: number): void;
  addToTotalCount(count: number): void;
  updateMinAndMax(value: number): void;
}
