/** One thing wrong with a config, before it is turned into a ConfigError. */
export interface ConfigProblem {
  /** JSON pointer into the file (`/upstreams/2/weight`), `env NAME` for an environment override, `` for the whole file. */
  pointer: string;
  reason: string;
  /** 1-based position, for JSON syntax errors. */
  line?: number;
  column?: number;
}

/** `(got …)` text: the offending value, shortened so a huge value does not drown the message. */
export function shown(value: unknown): string {
  const text = value === undefined ? 'nothing' : JSON.stringify(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

export function escapePointerToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}
