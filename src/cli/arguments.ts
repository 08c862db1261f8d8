import { parseArgs, type ParseArgsConfig } from 'node:util';
import { isValidHost } from '../http/host-header.js';
import { UsageError } from './usage-error.js';

/** An HTTP method is a token (RFC 9110 9.1, 5.6.2), as the router takes it. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** type "/" subtype, then any parameters (RFC 9110 8.3.1). */
const MEDIA_TYPE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+\/[!#$%&'*+.^_`|~0-9A-Za-z-]+[ \t]*(;.*)?$/;

/** Usage errors are printed through printable() (main.ts): what they quote needs no escaping here. */
const quoted = (value: string): string => `"${value}"`;

/**
 * parseArgs, with an option given twice refused: parseArgs keeps the last occurrence of a
 * single-value option, so `check --config bad.json --config good.json` checked only good.json and
 * `start --port A --port B` listened on B. Only options declared `multiple` (`--doc`) may repeat.
 */
export function parseCommandLine<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  const parsed = parseArgs({ ...config, tokens: true });
  const seen = new Set<string>();
  for (const token of parsed.tokens ?? []) {
    if (token.kind !== 'option' || config.options?.[token.name]?.multiple === true) continue;
    if (seen.has(token.name)) throw new UsageError(`--${token.name} is given more than once; give it once`);
    seen.add(token.name);
  }
  return parsed as ReturnType<typeof parseArgs<T>>;
}

/**
 * A value of `--name` that starts with "-" (`--workers -1`) is taken by parseArgs for an option it
 * cannot tell apart; written `--name=-1` it is a value, which the command's range check then refuses.
 */
export function joinDashValues(argv: readonly string[], names: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const next = argv[i + 1];
    if (names.includes(arg) && next !== undefined && /^-\d/.test(next)) {
      out.push(`${arg}=${next}`);
      i++;
    } else {
      out.push(arg);
    }
  }
  return out;
}

/** `--doc FILE|URL`: a file, or an http(s) URL; any other scheme is refused before anything is read. */
export function checkDocSources(docs: readonly string[]): void {
  for (const doc of docs) {
    const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):\/\//.exec(doc)?.[1];
    if (scheme !== undefined && !/^https?$/i.test(scheme)) {
      throw new UsageError(`--doc ${quoted(doc)}: only files and http(s) URLs are read, not ${scheme}: URLs`);
    }
  }
  const twice = docs.find((doc, i) => docs.indexOf(doc) !== i);
  if (twice !== undefined) throw new UsageError(`--doc ${twice} is given twice`);
}

/** `--host HOST`: what a request's Host header may hold (the gateway answers 400 to anything else). */
export function checkHost(host: string | undefined): void {
  if (host === undefined) return;
  if (host === '' || !isValidHost(host)) throw new UsageError(`--host must be a Host header value, a host name or address with an optional :port; got ${quoted(host)}`);
}

/** `--content-type TYPE`: a media type, as a request's Content-Type header holds one. */
export function checkContentType(value: string | undefined): void {
  if (value === undefined) return;
  if (!MEDIA_TYPE.test(value)) throw new UsageError(`--content-type must be a media type (type/subtype, e.g. application/json); got ${quoted(value)}`);
}

/** A request's method, as `explain` is given it. */
export function checkMethod(method: string): void {
  if (!TOKEN.test(method)) throw new UsageError(`${quoted(method)} is not an HTTP method: a method is letters, digits and !#$%&'*+-.^_\`|~, with no space`);
}
