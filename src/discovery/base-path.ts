/**
 * The prefix of every path key of a doc: Swagger 2.0 `basePath`, or the path of the first OpenAPI 3
 * server URL (variables replaced by their defaults; a relative URL is relative to where the doc was
 * fetched, as OpenAPI 3 says). Returned without a trailing slash: "" for the root.
 */
export function docBasePath(doc: Record<string, any>, docUrl: string): string {
  if (doc.swagger !== undefined) return trimTrailingSlash(typeof doc.basePath === 'string' ? doc.basePath : '');
  const server = Array.isArray(doc.servers) ? doc.servers[0] : undefined;
  if (!server || typeof server.url !== 'string') return '';
  const url = server.url.replace(/\{([^}]*)\}/g, (_match: string, name: string) => {
    const value = server.variables?.[name]?.default;
    return value === undefined ? '' : String(value);
  });
  let path: string;
  try {
    path = new URL(url, docUrl).pathname;
  } catch {
    path = url;
  }
  return trimTrailingSlash(path);
}

/** Base path + path key, without doubling or dropping the slash between them. */
export function joinTemplate(basePath: string, pathKey: string): string {
  const base = trimTrailingSlash(basePath);
  const key = pathKey.startsWith('/') ? pathKey : `/${pathKey}`;
  return base === '' ? key : base + key;
}

function trimTrailingSlash(path: string): string {
  return path.replace(/\/+$/, '');
}
