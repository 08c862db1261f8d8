import { escapePointerToken, type ConfigProblem } from './config-problem.js';

/**
 * `${NAME}` and `${NAME:-default}` in string values, replaced from the environment; `$${` is a
 * literal `${`. As in a POSIX shell, `${NAME:-default}` takes the default when NAME is unset or
 * empty, and `${NAME}` of an empty NAME is empty. An unset variable with no default is a problem naming the variable and the value's JSON pointer. Keys are never substituted, and neither
 * is the text a substitution brings in (a value is read once, left to right).
 */
const REFERENCE = /\$\$\{|\$\{([^}]*)\}/g;
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export function substituteEnv(value: unknown, env: NodeJS.ProcessEnv): { value: unknown; problems: ConfigProblem[] } {
  const problems: ConfigProblem[] = [];
  return { value: walk(value, '', env, problems), problems };
}

function walk(value: unknown, pointer: string, env: NodeJS.ProcessEnv, problems: ConfigProblem[]): unknown {
  if (typeof value === 'string') return value.includes('${') ? substitute(value, pointer, env, problems) : value;
  if (Array.isArray(value)) return value.map((item, i) => walk(item, `${pointer}/${i}`, env, problems));
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      // defineProperty: a key named __proto__ stays an own key (the schema then refuses it by name).
      Object.defineProperty(out, key, { value: walk(item, `${pointer}/${escapePointerToken(key)}`, env, problems), enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  return value;
}

function substitute(text: string, pointer: string, env: NodeJS.ProcessEnv, problems: ConfigProblem[]): string {
  return text.replace(REFERENCE, (match, inner: string | undefined) => {
    if (inner === undefined) return '${';
    const split = inner.indexOf(':-');
    const name = split < 0 ? inner : inner.slice(0, split);
    if (!NAME.test(name)) {
      problems.push({ pointer, reason: `"${match}" is not a variable reference: write \${NAME} or \${NAME:-default} (NAME: letters, digits, _), or $\${ for a literal \${` });
      return match;
    }
    const set = env[name];
    // As in a POSIX shell: `:-` also covers a variable set to "".
    if (split >= 0) return set === undefined || set === '' ? inner.slice(split + 2) : set;
    if (set !== undefined) return set;
    problems.push({ pointer, reason: `environment variable ${name} is not set and \${${name}} has no default (write \${${name}:-default} to give one)` });
    return match;
  });
}
