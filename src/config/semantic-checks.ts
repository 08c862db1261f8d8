import { Buffer } from 'node:buffer';
import type { GatewayConfig } from './types.js';
import { normalizeServiceLocation } from './service-location.js';
import type { ConfigProblem } from './config-problem.js';
import { bucketProblems } from '../metrics/buckets.js';
import { rangeProblem } from '../http/trusted-proxies.js';
import { checkListenerFiles, checkListeners } from '../listeners/registry.js';
import { middlewareProblems, middlewareWarnings } from '../middleware/registry.js';
import { LOCAL_STORE, kvStoreProblems } from '../stores/config.js';
import { checkObserveConfig, checkRequestIdHeader } from '../observe/config-checks.js';
import { listenHostProblem } from './listen-host.js';
import { dropTrailingSlash, normalizePath } from '../http/normalize-path.js';
import { DEFAULT_MAX_URL_BYTES } from '../edge/request-line.js';
import { hasSlashLookalike, isTargetText, sendableText } from '../http/request-target.js';
import { DATABASES_PER_CACHE, MAX_DATABASES, MAX_LOCAL_CACHES } from '../cache/lmdb-env.js';

type Rule = (config: GatewayConfig, explicitPathKeys: ReadonlySet<string>) => ConfigProblem[];

const RULES: readonly Rule[] = [
  checkUpstreams,
  checkBuiltinPaths,
  checkTrustedProxies,
  checkPorts,
  checkListenHosts,
  checkMiddlewareIds,
  (config) => checkListeners(config.listeners),
  (config) => checkListenerFiles(config.listeners),
  (config) => middlewareProblems(config.middleware),
  (config) => kvStoreProblems(config.kvStores),
  checkStoreNames,
  checkLocalCacheCount,
  (config) => bucketProblems(config.metrics.histogramBucketsS).map((reason) => ({ pointer: '/metrics/histogramBucketsS', reason })),
  checkObserveConfig,
  checkRequestIdHeader,
];

/**
 * What the gateway runs as written but is likely a mistake: `gateway check` prints each as a warning
 * (and still exits 0), start and every reload log them. `config` is a loaded one.
 */
export function configWarnings(config: GatewayConfig): ConfigProblem[] {
  return middlewareWarnings(config.middleware);
}

/** Rules beyond the schema; `config` has passed the schema and holds its defaults. */
export function checkConfigRules(config: GatewayConfig, explicitPathKeys: ReadonlySet<string>): ConfigProblem[] {
  return RULES.flatMap((rule) => rule(config, explicitPathKeys));
}

/**
 * The same rules on a config the schema refused (`schemaProblems`), so that one run lists every
 * problem it can (`gateway check`, a failed start): a rule that cannot read a part the schema refused
 * is skipped, and a problem at, inside or around a place the schema already named is left out (it
 * would only restate it, or be about a value the schema did not accept).
 */
export function checkConfigRulesBeside(config: unknown, explicitPathKeys: ReadonlySet<string>, schemaProblems: readonly ConfigProblem[]): ConfigProblem[] {
  const refused = schemaProblems.map((problem) => problem.pointer);
  const related = (pointer: string): boolean => refused.some((place) => isWithin(pointer, place) || isWithin(place, pointer));
  const problems: ConfigProblem[] = [];
  for (const rule of RULES) {
    let found: ConfigProblem[];
    try {
      found = rule(config as GatewayConfig, explicitPathKeys);
    } catch {
      continue;
    }
    for (const problem of found) if (!related(problem.pointer)) problems.push(problem);
  }
  return problems;
}

/** Whether JSON pointer `inner` is `outer` or lies under it ('' holds everything). */
function isWithin(inner: string, outer: string): boolean {
  return inner === outer || outer === '' || inner.startsWith(outer + '/');
}

/** A middleware's `store` must be "local" or a kvStores name. */
function checkStoreNames(config: GatewayConfig): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const known = Object.keys(config.kvStores);
  config.middleware.forEach((entry, index) => {
    if (!('store' in entry) || entry.store === LOCAL_STORE || known.includes(entry.store)) return;
    const choices = [LOCAL_STORE, ...known].map((name) => `"${name}"`).join(', ');
    problems.push({ pointer: `/middleware/${index}/store`, reason: `"${entry.store}" is not a store; known: ${choices} (kvStores defines the others)` });
  });
  return problems;
}

/** The local store's caches share one LMDB environment per worker, which holds MAX_LOCAL_CACHES of them. */
function checkLocalCacheCount(config: GatewayConfig): ConfigProblem[] {
  let count = 0;
  const problems: ConfigProblem[] = [];
  config.middleware.forEach((entry, index) => {
    if (entry.type !== 'responseCache' || entry.store !== LOCAL_STORE) return;
    if (++count !== MAX_LOCAL_CACHES + 1) return;
    problems.push({
      pointer: `/middleware/${index}/store`,
      reason:
        `responseCache "${entry.id}" is cache ${count} on the "${LOCAL_STORE}" store; at most ${MAX_LOCAL_CACHES} fit in a worker's LMDB environment ` +
        `(${DATABASES_PER_CACHE} of its ${MAX_DATABASES} databases each): use fewer caches, or a kvStores store for some`,
    });
  });
  return problems;
}

function checkMiddlewareIds(config: GatewayConfig): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const first = new Map<string, number>();
  config.middleware.forEach((entry, index) => {
    const seen = first.get(entry.id);
    if (seen === undefined) first.set(entry.id, index);
    else problems.push({ pointer: `/middleware/${index}/id`, reason: `"${entry.id}" is also the id of /middleware/${seen}; ids must be unique` });
  });
  return problems;
}

function checkTrustedProxies(config: GatewayConfig): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  config.trustedProxies.forEach((entry, index) => {
    const reason = rangeProblem(entry);
    if (reason !== null) problems.push({ pointer: `/trustedProxies/${index}`, reason: `${reason} (an address or a CIDR range like "10.0.0.0/8")` });
  });
  return problems;
}

/** `host` and `admin.host` are addresses or host names; whether a name resolves is seen at start. */
function checkListenHosts(config: GatewayConfig): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const hostProblem = listenHostProblem(config.host);
  if (hostProblem !== null) problems.push({ pointer: '/host', reason: hostProblem });
  const admin = config.admin;
  const adminProblem = admin === undefined ? null : listenHostProblem(admin.host);
  if (adminProblem !== null) problems.push({ pointer: '/admin/host', reason: adminProblem });
  return problems;
}

/** Each listener needs a port of its own (0 picks a free one); the start checks again after --port. */
export function checkPorts(config: GatewayConfig): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const admin = config.admin;
  if (admin !== undefined && admin.port !== 0 && admin.port === config.port) {
    problems.push({ pointer: '/admin/port', reason: `${admin.port} is also the public port; the admin listener needs a port of its own` });
  }
  const tls = config.tls;
  if (tls !== undefined && tls.port !== 0) {
    // With plainPort "off" the public port is not opened.
    if (tls.plainPort !== 'off' && tls.port === config.port) {
      problems.push({ pointer: '/tls/port', reason: `${tls.port} is also the public port; the TLS listener needs a port of its own` });
    } else if (admin !== undefined && tls.port === admin.port) {
      problems.push({ pointer: '/tls/port', reason: `${tls.port} is also the admin port; the TLS listener needs a port of its own` });
    }
  }
  return problems;
}

function checkUpstreams(config: GatewayConfig): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const firstIndexByOrigin = new Map<string, number>();
  config.upstreams.forEach((upstream, index) => {
    const pointer = `/upstreams/${index}/serviceLocation`;
    const checked = normalizeServiceLocation(upstream.serviceLocation);
    if ('reason' in checked) {
      problems.push({ pointer, reason: checked.reason });
      return;
    }
    const first = firstIndexByOrigin.get(checked.origin);
    if (first !== undefined) {
      problems.push({
        pointer,
        reason:
          `${JSON.stringify(upstream.serviceLocation)} is the same upstream as /upstreams/${first} ` +
          `(${JSON.stringify(config.upstreams[first]!.serviceLocation)}); each serviceLocation may appear once`,
      });
      return;
    }
    firstIndexByOrigin.set(checked.origin, index);
  });
  return problems;
}

/**
 * Built-in paths are compared as the router sees them: one trailing slash does not make a path
 * different. A clash is reported on the key the file set, not on the one left at its default.
 */
function checkBuiltinPaths(config: GatewayConfig, explicitKeys: ReadonlySet<string>): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const ownerByPath = new Map<string, string>();
  const paths = config.paths as Record<string, string>;
  for (const [key, path] of Object.entries(paths)) {
    if (typeof path !== 'string') continue;
    const reached = reachablePath(path, config.encodedSlashes === 'reject');
    if (typeof reached !== 'string') {
      problems.push({ pointer: `/paths/${key}`, reason: reached.reason });
      continue;
    }
    // A request for a longer path is a 414 before it is matched: the built-in would never answer.
    const bytes = Buffer.byteLength(reached);
    const maxUrlBytes = config.limits.maxUrlBytes ?? DEFAULT_MAX_URL_BYTES;
    if (bytes > maxUrlBytes) {
      const where = explicitKeys.has(key) ? `/paths/${key}` : '/limits/maxUrlBytes';
      const what = `paths.${key}${explicitKeys.has(key) ? '' : ' (by default)'}`;
      problems.push({
        pointer: where,
        reason: `${what} ${JSON.stringify(reached)} is ${bytes} bytes, longer than limits.maxUrlBytes (${maxUrlBytes}): every request for it is a 414, so it would never answer`,
      });
      continue;
    }
    const owner = ownerByPath.get(reached);
    if (owner === undefined) {
      ownerByPath.set(reached, key);
      continue;
    }
    const [blamed, other] = explicitKeys.has(key) ? [key, owner] : [owner, key];
    const otherText = `paths.${other}${explicitKeys.has(other) ? '' : ' (by default)'}`;
    problems.push({
      pointer: `/paths/${blamed}`,
      reason: `${JSON.stringify(paths[blamed])} is also ${otherText}; each built-in endpoint needs its own path`,
    });
  }
  return problems;
}

/**
 * The path a built-in at `path` is matched by (requests are matched after path normalization,
 * docs/reference/builtins.md), or why no request can reach it: `path` is refused unless it is already
 * in normalized form (a trailing slash aside), since a request for it as written is normalized before
 * it is compared, and the form to write instead is named.
 */
function reachablePath(path: string, rejectEncodedSlashes: boolean): string | { reason: string } {
  const written = JSON.stringify(path);
  const unreachable = `no request can reach ${written}`;
  if (!isTargetText(path)) {
    // encodeURIComponent throws exactly on a lone surrogate; sendableText would write U+FFFD for it.
    try {
      encodeURIComponent(path);
    } catch {
      return { reason: `${unreachable}: it holds a lone UTF-16 surrogate, which has no UTF-8 form` };
    }
  }
  // Raw characters a request target cannot hold (UTF-8, "#") are sent percent-encoded.
  const normalized = normalizePath(sendableText(path));
  if (normalized === null) {
    return { reason: `${unreachable}: it holds a malformed percent-escape or a ".." above the root, and a request with it is a 400` };
  }
  if (rejectEncodedSlashes && hasSlashLookalike(normalized)) {
    return { reason: `${unreachable}: it holds a "\\" or an encoded "/" or "\\" (%2F, %5C), and encodedSlashes is "reject"` };
  }
  if (normalized !== dropTrailingSlash(path)) {
    return {
      reason: `${written} is not in normalized form (requests are matched after path normalization: escapes of unreserved characters decoded, other escapes in upper-case hex, no "." or ".." segments, characters outside visible ASCII percent-encoded), so no request can reach it; write ${JSON.stringify(normalized)}`,
    };
  }
  return normalized;
}
