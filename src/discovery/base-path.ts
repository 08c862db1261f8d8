import type { Objection } from './objection.js';

/**
 * The prefix of every path key of a doc: Swagger 2.0 `basePath`, or the path of the first OpenAPI 3
 * server URL (variables replaced by their defaults; a relative URL is relative to where the doc was
 * fetched, as OpenAPI 3 says). Returned without a trailing slash: "" for the root.
 *
 * What no request path can hold is taken out and objected to (into `objections`): a query or fragment
 * in a basePath (cut there), dot-segments (resolved, as the gateway resolves them in requests), a
 * server variable the doc does not define (replaced by nothing). Braces in a basePath are objected to
 * and percent-encoded, so that they stay literal text in the templates; a server URL's come out of
 * `new URL()` encoded already.
 */
export function docBasePath(doc: Record<string, any>, docUrl: string, objections: Objection[] = []): string {
  if (doc.swagger !== undefined) {
    let basePath = typeof doc.basePath === 'string' ? doc.basePath : '';
    const cut = basePath.search(/[?#]/);
    if (cut !== -1) {
      objections.push({ pointer: ['basePath'], message: `"${basePath}" holds a query or fragment, which no request path has: the basePath is taken as "${basePath.slice(0, cut)}"` });
      basePath = basePath.slice(0, cut);
    }
    if (/[{}]/.test(basePath)) {
      // Swagger 2.0: "The basePath does not support path templating". Joined to a path key, a raw brace
      // would open a placeholder, and the doc would claim paths of any name there.
      const literal = basePath.replace(/\{/g, '%7B').replace(/\}/g, '%7D');
      objections.push({ pointer: ['basePath'], message: `"${basePath}" holds braces, which a basePath matches literally (it has no path templating): the basePath is taken as "${literal}"` });
      basePath = literal;
    }
    if (/(^|\/)\.\.?(\/|$)/.test(basePath)) {
      const resolved = new URL(basePath, 'http://base.invalid/').pathname;
      objections.push({ pointer: ['basePath'], message: `"${basePath}" holds dot-segments, which the gateway resolves in every request: the basePath is taken as "${resolved}"` });
      basePath = resolved;
    }
    return trimTrailingSlash(basePath);
  }
  const server = Array.isArray(doc.servers) ? doc.servers[0] : undefined;
  if (!server || typeof server.url !== 'string') return '';
  const url = server.url.replace(/\{([^}]*)\}/g, (_match: string, name: string) => {
    const value = server.variables?.[name]?.default;
    if (value === undefined) objections.push({ pointer: ['servers', '0', 'url'], message: `the server variable {${name}} has no default in servers[0].variables: it is replaced by nothing` });
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
