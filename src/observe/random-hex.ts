/**
 * Random lower-case hex ids (trace and span ids) drawn from a pooled buffer: one randomFillSync per
 * 4 KiB instead of one crypto call per id. Ids are never all zero (W3C Trace Context forbids it).
 */
import { randomFillSync } from 'node:crypto';

const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let at = POOL_BYTES;

/** `bytes` random bytes as 2 x `bytes` lower-case hex characters, never all zero. */
export function randomHex(bytes: number): string {
  for (;;) {
    if (at + bytes > POOL_BYTES) {
      randomFillSync(pool);
      at = 0;
    }
    const start = at;
    at += bytes;
    for (let i = start; i < at; i++) if (pool[i] !== 0) return pool.toString('hex', start, at);
  }
}
