/** One thing wrong with a config, before it is turned into a ConfigError. */
export interface ConfigProblem {
  /** JSON pointer into the file (`/upstreams/2/weight`), `env NAME` for an environment override, `` for the whole file. */
  pointer: string;
  reason: string;
  /** 1-based position, for JSON syntax errors. */
  line?: number;
  column?: number;
}

/** Characters of a value a message shows. */
const SHOWN_CHARS = 60;

/**
 * `(got …)` text: the offending value as JSON, shortened so a huge value does not drown the message.
 * Written only as far as it is shown: a config's values can be megabytes, and one is shown per problem.
 * Numbers JSON cannot write (1e999 parses as Infinity) are shown as JavaScript writes them.
 */
export function shown(value: unknown): string {
  if (value === undefined) return 'nothing';
  const out = { text: '' };
  writeBounded(value, out, SHOWN_CHARS);
  return out.text.length > SHOWN_CHARS ? `${out.text.slice(0, SHOWN_CHARS - 3)}...` : out.text;
}

function writeBounded(value: unknown, out: { text: string }, limit: number): void {
  if (typeof value === 'string') {
    out.text += JSON.stringify(value.length > limit ? value.slice(0, limit) : value);
  } else if (Array.isArray(value)) {
    out.text += '[';
    for (let i = 0; i < value.length && out.text.length <= limit; i++) {
      if (i > 0) out.text += ',';
      writeBounded(value[i], out, limit);
    }
    out.text += ']';
  } else if (typeof value === 'object' && value !== null) {
    out.text += '{';
    let first = true;
    for (const key in value) {
      if (out.text.length > limit) break;
      if (!Object.hasOwn(value, key)) continue;
      out.text += `${first ? '' : ','}${JSON.stringify(key.length > limit ? key.slice(0, limit) : key)}:`;
      first = false;
      writeBounded((value as Record<string, unknown>)[key], out, limit);
    }
    out.text += '}';
  } else {
    out.text += String(value);
  }
}

/** A key (or other name) quoted in a message, shortened like a shown value. */
export function shownKey(key: string): string {
  return key.length > SHOWN_CHARS ? `${key.slice(0, SHOWN_CHARS - 3)}...` : key;
}

export function escapePointerToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}
