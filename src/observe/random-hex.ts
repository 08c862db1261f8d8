/**
 * Random lower-case hex ids (trace and span ids) cut from a pooled hex string: one randomFillSync and
 * one hex conversion per 16 KiB of randomness instead of a crypto call and a conversion per id (an id is
 * then a slice of that string). Ids are never all zero (W3C Trace Context forbids it).
 *
 * Why 16 KiB: a randomFillSync call costs about 5 µs here, nearly all of it fixed (each call makes a
 * getpid system call, strace shows; 64 KiB take 13.5 µs), and with a 4 KiB pool a gateway worker's
 * profile under wrk spent 0.4 µs a request in it (a request takes 32 bytes). A `node` loop of a
 * million 32-byte ids: 4 KiB 74-222 ns an id, 16 KiB 47-88 ns, 64 KiB 287-341 ns (its 128 KiB
 * string goes to V8's large-object space).
 *
 * V8 keeps a slice's whole parent alive: an id pins its pool's 32 KiB string for as long as the id
 * lives. That is free for ids that die with their request. Whatever keeps an id longer takes
 * `ownedId(id)` instead (see there).
 */
import { randomFillSync } from 'node:crypto';

const POOL_BYTES = 16 * 1024;
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

/**
 * A copy of a randomHex id that holds no reference to the pool. Spans queued for export keep their
 * request's ids for up to a second: at 1% sampling each kept request pinned a pool string of its
 * own, and a gateway under load promoted 55 KB to the old generation per 1,000 requests against 2 KB
 * without sampling (`--trace-gc-nvp`, wrk -c50 for 20 s), a mark-compact every 7 s instead of one in
 * 2 minutes. With the copies: 11.7-13.2 KB (two runs).
 */
export function ownedId(id: string): string {
  // The concatenation is a cons string; slice() first flattens it into a new string of 1 + id.length
  // characters, and the slice's parent is that string, not the pool.
  return (' ' + id).slice(1);
}
