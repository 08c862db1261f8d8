/**
 * Bounds of the config's durations. A duration that reaches a timer (setTimeout, setInterval, an undici
 * timeout) must fit Node's timers: a longer delay fires after 1 ms instead (with a TimeoutOverflowWarning),
 * so a 30-day refresh interval became a fetch storm and a 30-day shutdown grace an immediate kill.
 * Lifetimes that are only compared with the clock (cache lifetimes, the rate-limit window) may be longer.
 */

/** The longest delay Node's timers take: 2^31 - 1 ms, about 24.8 days. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** RFC 9111 (1.2.2): a cache takes a larger delta-seconds as 2^31 seconds. The longest cache lifetime, in ms. */
export const MAX_LIFETIME_MS = 2 ** 31 * 1000;

/** Why a duration is refused above MAX_TIMER_MS, and above MAX_LIFETIME_MS (schema-errors.ts words the message). */
export const DURATION_LIMIT_REASONS: ReadonlyMap<number, string> = new Map([
  [MAX_TIMER_MS, `must be at most ${MAX_TIMER_MS} ms (24.8 days), the longest timer Node can set`],
  [MAX_LIFETIME_MS, `must be at most ${MAX_LIFETIME_MS} ms (2^31 s), the longest lifetime RFC 9111 lets a cache use`],
]);

/** The schema of a duration that reaches a timer: an integer of ms from `minimum` to MAX_TIMER_MS. */
export function timerDuration(description: string, defaultValue: number, minimum = 1): { type: 'integer'; minimum: number; maximum: number; default: number; description: string } {
  return { type: 'integer', minimum, maximum: MAX_TIMER_MS, default: defaultValue, description };
}

/**
 * A delay computed from configured durations (a sum, a doubling), made fit for a timer: one over
 * MAX_TIMER_MS waits MAX_TIMER_MS instead of firing at once.
 */
export function timerDelay(ms: number): number {
  return ms > MAX_TIMER_MS ? MAX_TIMER_MS : ms;
}
