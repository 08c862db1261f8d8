/**
 * Name matching of virtual hosts (./host-sets.ts): exact names first, then the longest `*.` wildcard,
 * which stands for one or more DNS labels. Names compare case-insensitively.
 */
import { isDnsName, MAX_HOST_NAME_LENGTH } from './host-value.js';

export class NameMatcher<T> {
  private readonly exact = new Map<string, T>();
  /** Wildcard suffixes (".example.com"), longest first. */
  private readonly wildcards: Array<{ suffix: string; value: T }> = [];

  add(name: string, value: T): void {
    const lower = name.toLowerCase();
    if (lower.startsWith('*.')) {
      this.wildcards.push({ suffix: lower.slice(1), value });
      this.wildcards.sort((a, b) => b.suffix.length - a.suffix.length);
    } else if (!this.exact.has(lower)) {
      this.exact.set(lower, value);
    }
  }

  /**
   * `name` must be lower case. A name that is no DNS name matches no wildcard (`..a.test`,
   * `evil.test,x.a.test`, `a;b.a.test` end as `*.a.test`'s names do), nor one longer than a DNS name
   * may be: the names /spec?host= refuses as no host names (./host-value.ts) are served by none.
   */
  match(name: string): T | undefined {
    if (name.length > MAX_HOST_NAME_LENGTH) return undefined;
    const exact = this.exact.get(name);
    if (exact !== undefined) return exact;
    if (this.wildcards.length === 0 || !isDnsName(name)) return undefined;
    for (const { suffix, value } of this.wildcards) {
      if (name.length > suffix.length && name.endsWith(suffix)) return value;
    }
    return undefined;
  }

  get size(): number {
    return this.exact.size + this.wildcards.length;
  }
}

/** The host name of a Host header value: port and a trailing dot dropped, lower case; '' when none. */
export function hostName(host: string | undefined): string {
  if (host === undefined || host === '') return '';
  let end = host.length;
  if (host.charCodeAt(0) === 91 /* [ */) {
    const close = host.indexOf(']');
    return (close === -1 ? host : host.slice(0, close + 1)).toLowerCase();
  }
  const colon = host.lastIndexOf(':');
  if (colon !== -1) end = colon;
  if (end > 0 && host.charCodeAt(end - 1) === 46 /* . */) end--;
  return host.slice(0, end).toLowerCase();
}
