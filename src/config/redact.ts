/**
 * Messages about a config never show what a `${VAR}` brought in: a variable often holds a secret, and
 * the messages reach logs (a refused reload) and terminals. A value that took a variable's value is
 * described by the file's text and its length, `(got the value of ${API_TOKEN}, 14 characters)`, and
 * any such value (or variable value) a rule's message quotes is put back as the `${NAME}` that brought it.
 */
import { shown, type ConfigProblem } from './config-problem.js';
import type { Substitution } from './substitute.js';

/** A variable value at least this long is replaced wherever a message quotes it; shorter ones ("1", "on") would match ordinary words. */
const MIN_REPLACED_CHARS = 4;
const WHOLE_REFERENCE = /^\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}$/;

export class SubstitutedValues {
  /** [text to hide, what replaces it], longest first so that a value containing another is replaced whole. */
  private readonly replacements: Array<[string, string]>;

  constructor(
    private readonly substitutions: ReadonlyMap<string, Substitution>,
    /** The config as the file has it, before substitution. */
    private readonly original: unknown,
  ) {
    const replacements = new Map<string, string>();
    for (const substitution of substitutions.values()) {
      for (const { name, value } of substitution.variables) if (value.length >= MIN_REPLACED_CHARS) replacements.set(value, `\${${name}}`);
      if (substitution.value !== '') replacements.set(substitution.value, substitution.template);
    }
    for (const [text, by] of [...replacements]) {
      const escaped = JSON.stringify(text).slice(1, -1);
      if (escaped !== text) replacements.set(escaped, JSON.stringify(by).slice(1, -1));
    }
    this.replacements = [...replacements].sort((a, b) => b[0].length - a[0].length);
  }

  /** What a `(got …)` shows of `value`, found at `pointer`. */
  shown(pointer: string, value: unknown): string {
    if (this.substitutions.size === 0) return shown(value);
    const own = this.substitutions.get(pointer);
    if (own !== undefined) return described(own);
    // A value holding a substituted one is shown as the file writes it.
    for (const inner of this.substitutions.keys()) {
      if (pointer === '' || inner.startsWith(`${pointer}/`)) return shown(valueAt(this.original, pointer));
    }
    return shown(value);
  }

  /** The problem with every substituted value (and variable value) its reason quotes put back as the file's text. */
  redact(problem: ConfigProblem): ConfigProblem {
    let reason = problem.reason;
    for (const [text, by] of this.replacements) if (reason.includes(text)) reason = reason.replaceAll(text, by);
    return reason === problem.reason ? problem : { ...problem, reason };
  }
}

function described(substitution: Substitution): string {
  const length = `${substitution.value.length} character${substitution.value.length === 1 ? '' : 's'}`;
  const whole = WHOLE_REFERENCE.exec(substitution.template);
  if (whole !== null) return `the value of \${${whole[1]}}, ${length}`;
  return `${shown(substitution.template)} with the environment's values, ${length}`;
}

function valueAt(root: unknown, pointer: string): unknown {
  let value = root;
  for (const token of pointer.split('/').slice(1)) {
    const key = token.replaceAll('~1', '/').replaceAll('~0', '~');
    if (typeof value !== 'object' || value === null || !Object.hasOwn(value, key)) return undefined;
    value = (value as Record<string, unknown>)[key];
  }
  return value;
}
