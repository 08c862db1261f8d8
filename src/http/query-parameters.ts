/**
 * Reading the pairs of a raw query string (the request target's part after "?", not decoded): names
 * and values percent-decoded with "+" as a space, as HTML forms and most servers read them.
 */
/**
 * The first value of `name` in a raw query string (pairs split at "&", names and values
 * percent-decoded, "+" as a space): undefined when absent, null when that value does not decode.
 */
export function queryValue(query: string, name: string): string | null | undefined {
  if (query === '') return undefined;
  for (const pair of query.split('&')) {
    const eq = pair.indexOf('=');
    const key = eq === -1 ? pair : pair.slice(0, eq);
    if (decodeComponent(key) !== name) continue;
    return eq === -1 ? '' : (decodeComponent(pair.slice(eq + 1)) ?? null);
  }
  return undefined;
}

/**
 * Whether the raw query holds a pair whose name, percent-decoded ("+" as a space), is one of `names`.
 * Allocates nothing unless a pair's name is itself encoded (holds "%" or "+").
 */
export function hasQueryParameter(query: string, names: readonly string[]): boolean {
  const length = query.length;
  let start = 0;
  while (start <= length) {
    let end = start;
    let nameEnd = -1;
    let encoded = false;
    for (; end < length; end++) {
      const c = query.charCodeAt(end);
      if (c === 0x26) break;
      if (nameEnd !== -1) continue;
      if (c === 0x3d) nameEnd = end;
      else if (c === 0x25 || c === 0x2b) encoded = true;
    }
    if (nameEnd === -1) nameEnd = end;
    if (encoded) {
      const decoded = decodeComponent(query.slice(start, nameEnd));
      if (decoded !== undefined && names.includes(decoded)) return true;
    } else {
      const size = nameEnd - start;
      for (let i = 0; i < names.length; i++) {
        const name = names[i]!;
        if (name.length === size && query.startsWith(name, start)) return true;
      }
    }
    start = end + 1;
  }
  return false;
}

/** `query` without the pairs named one of `names`: the same string, nothing allocated, when it holds none. */
export function stripQueryParameters(query: string, names: readonly string[]): string {
  return query !== '' && hasQueryParameter(query, names) ? withoutQueryParameters(query, names) : query;
}

/** The raw query without any pair named one of `names` (as hasQueryParameter reads names); the other pairs stay byte for byte. */
export function withoutQueryParameters(query: string, names: readonly string[]): string {
  return query
    .split('&')
    .filter((pair) => {
      const eq = pair.indexOf('=');
      const name = decodeComponent(eq === -1 ? pair : pair.slice(0, eq));
      return name === undefined || !names.includes(name);
    })
    .join('&');
}

/**
 * `query` with the value of each pair named one of `names` (as hasQueryParameter reads names) replaced
 * by `digest(value)`, the raw value as sent; the pairs' names and the other pairs stay byte for byte.
 * The same string, nothing allocated, when it holds none.
 */
export function digestQueryParameters(query: string, names: readonly string[], digest: (value: string) => string): string {
  if (query === '' || !hasQueryParameter(query, names)) return query;
  return query
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const name = decodeComponent(eq === -1 ? pair : pair.slice(0, eq));
      if (name === undefined || !names.includes(name)) return pair;
      return eq === -1 ? pair : `${pair.slice(0, eq)}=${digest(pair.slice(eq + 1))}`;
    })
    .join('&');
}

function decodeComponent(text: string): string | undefined {
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return undefined;
  }
}
