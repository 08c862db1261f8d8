/**
 * Random lower-case hex ids (trace and span ids) cut from a pooled hex string: one randomFillSync and
 * one hex conversion per 4 KiB of randomness instead of a crypto call and a conversion per id (an id is
 * then a slice of that string). Ids are never all zero (W3C Trace Context forbids it).
 */
import { randomFillSync } from 'node:crypto';

const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let hex = '';
/** Next unused character of `hex`. */
let at = POOL_BYTES * 2;

/** `bytes` random bytes as 2 x `bytes` lower-case hex characters, never all zero. */
export function randomHex(bytes: number): string {
  const length = bytes * 2;
  for (;;) {
    if (at + length > hex.length) {
      randomFillSync(pool);
      hex = pool.toString('hex');
      at = 0;
    }
    const start = at;
    at += length;
    for (let i = start; i < at; i++) if (hex.charCodeAt(i) !== 0x30) return hex.slice(start, at);
  }
}
