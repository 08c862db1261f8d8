/**
 * `promise`'s value, or `timedOut` once `ms` passed first. The timer is cleared either way: a bare
 * setTimeout in a Promise.race kept the test process alive for its whole length after the test was
 * done (60 s of one file's 69).
 */
export async function within<T, U>(promise: Promise<T>, ms: number, timedOut: U): Promise<T | U> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<U>((resolve) => (timer = setTimeout(() => resolve(timedOut), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
