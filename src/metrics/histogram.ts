import { Buffer } from 'node:buffer';
import * as hdr from 'hdr-histogram-js';
import type { Histogram } from 'hdr-histogram-js';

/** Latencies are recorded in microseconds, 1 µs .. 60 s. */
export const MAX_LATENCY_MICROS = 60_000_000;

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
    highestTrackableValue: MAX_LATENCY_MICROS,
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

/** Rounds to whole microseconds and clamps into the trackable range (out-of-range values would throw). */
export function clampLatency(micros: number): number {
  if (!(micros > 0)) return 0;
  if (micros >= MAX_LATENCY_MICROS) return MAX_LATENCY_MICROS;
  return Math.round(micros);
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
