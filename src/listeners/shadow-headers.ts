/**
 * Which headers of the two answers are compared, and how (docs/reference/listeners.md#alternateupstream).
 *
 * Never compared: hop-by-hop headers (docs/reference/respond.md#upstream-answers, and any header a Connection header names), and the
 * headers the gateway itself rewrites on every answer, so the client's copy of them says nothing
 * about the primary: Content-Length (framing; the bodies are compared instead), Date (uWS writes its
 * own) and Via (the gateway appends itself). The listener's `ignoreHeaders` come on top.
 */

export type HeaderMap = Map<string, string[]>;

export interface HeaderDifference {
  /** Lower-case name. */
  name: string;
  /** Every value the client got, in order; null when the client got no such header. */
  client: string[] | null;
  alternate: string[] | null;
}

const NEVER_COMPARED: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'date',
  'via',
]);

export function isNeverCompared(name: string): boolean {
  return NEVER_COMPARED.has(name) || name.startsWith('proxy-');
}

/** A flat [name, value, ...] list (the capture's end-to-end headers) as comparable header lists. */
export function headerMapFromFlat(flat: readonly string[], ignore: ReadonlySet<string>): HeaderMap {
  const map: HeaderMap = new Map();
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i]!.toLowerCase();
    if (isNeverCompared(name) || ignore.has(name)) continue;
    const values = map.get(name);
    if (values === undefined) map.set(name, [flat[i + 1]!]);
    else values.push(flat[i + 1]!);
  }
  return map;
}

/** undici's parsed response headers (lower-case names, repeated ones as arrays) as comparable header lists. */
export function headerMapFromParsed(headers: Readonly<Record<string, string | string[] | undefined>>, ignore: ReadonlySet<string>): HeaderMap {
  const named = connectionNamed(headers.connection);
  const map: HeaderMap = new Map();
  for (const [rawName, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const name = rawName.toLowerCase();
    if (isNeverCompared(name) || ignore.has(name) || named.has(name)) continue;
    const values = map.get(name) ?? [];
    if (Array.isArray(value)) values.push(...value);
    else values.push(value);
    map.set(name, values);
  }
  return map;
}

/**
 * Headers whose values differ, by name. A repeated header equals the same values joined by ", " in one
 * header (RFC 9110 5.3), except Set-Cookie, whose values are compared one by one.
 */
export function headerDifferences(client: HeaderMap, alternate: HeaderMap): HeaderDifference[] {
  const out: HeaderDifference[] = [];
  for (const [name, values] of client) {
    const other = alternate.get(name);
    if (other === undefined || !sameValues(name, values, other)) out.push({ name, client: values, alternate: other ?? null });
  }
  for (const [name, values] of alternate) {
    if (!client.has(name)) out.push({ name, client: null, alternate: values });
  }
  return out.sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
}

function sameValues(name: string, a: readonly string[], b: readonly string[]): boolean {
  if (name === 'set-cookie') return a.length === b.length && a.every((value, i) => value === b[i]);
  return a.join(', ') === b.join(', ');
}

function connectionNamed(connection: string | string[] | undefined): ReadonlySet<string> {
  const named = new Set<string>();
  if (connection === undefined) return named;
  for (const value of Array.isArray(connection) ? connection : [connection]) {
    for (const token of value.split(',')) {
      const name = token.trim().toLowerCase();
      if (name !== '' && name !== 'close' && name !== 'keep-alive') named.add(name);
    }
  }
  return named;
}

/** The request headers for the alternate: what the primary got, less the framing undici sets itself. */
export function shadowRequestHeaders(forwarded: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < forwarded.length; i += 2) {
    const name = forwarded[i]!;
    if (name === 'content-length' || name === 'transfer-encoding' || name === 'host') continue;
    out.push(name, forwarded[i + 1]!);
  }
  return out;
}
