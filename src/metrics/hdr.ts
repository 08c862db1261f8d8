/**
 * The parts of hdr-histogram-js the gateway uses, taken from the package's own modules instead of its
 * index. The index also loads HistogramLogWriter and HistogramLogReader (log formats the gateway never
 * writes), and the writer makes an Intl.NumberFormat as it loads: ICU's start-up, paid by every process
 * that imports the index (the primary, each worker, `gateway check`). encoding.js installs
 * JsHistogram's encode/decode as the index would (it loads JsHistogram.encoding.js).
 */
import type * as histogramModule from 'hdr-histogram-js/dist/Histogram.js';
import jsHistogramModule from 'hdr-histogram-js/dist/JsHistogram.js';

export { build } from 'hdr-histogram-js/dist/HistogramBuilder.js';
export { decodeFromCompressedBase64, encodeIntoCompressedBase64 } from 'hdr-histogram-js/dist/encoding.js';
export { initWebAssemblySync, WasmHistogram } from 'hdr-histogram-js/dist/wasm/index.js';

export type Histogram = histogramModule.default;

/** The class (the module's default export: a CommonJS module, whose namespace default is its exports object). */
export const JsHistogram = jsHistogramModule.default;
export type JsHistogram = InstanceType<typeof JsHistogram>;
