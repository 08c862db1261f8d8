/**
 * A configured id (a middleware's, a listener's) as one component of a counter name: "." and "%"
 * escaped, so `limit.v2` stays one level of the report and never shares a subtree with `limit`.
 */
export function counterPart(id: string): string {
  return id.replace(/%/g, '%25').replace(/\./g, '%2E');
}

/** The components of a counter name, each as given to counterPart ("middleware.limit%2Ev2.admitted" is middleware, limit.v2, admitted). */
export function counterPath(name: string): string[] {
  return name.split('.').map((part) => part.replace(/%(2E|25)/g, (escape) => (escape === '%2E' ? '.' : '%')));
}

/**
 * Named event counters of one worker (retries, and later middleware decisions), shipped with each
 * metrics delta and summed in the primary. A name is a dotted path ("retries.afterConnectFailure")
 * that the report nests into objects ({ retries: { afterConnectFailure: 3 } }).
 */
export class Counters {
  private counts = new Map<string, number>();

  add(name: string, n = 1): void {
    this.counts.set(name, (this.counts.get(name) ?? 0) + n);
  }

  get isEmpty(): boolean {
    return this.counts.size === 0;
  }

  /** What was counted since the last take, or null when nothing was. */
  take(): Record<string, number> | null {
    if (this.counts.size === 0) return null;
    const out = Object.fromEntries(this.counts);
    this.counts = new Map();
    return out;
  }
}
