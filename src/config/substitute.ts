import { escapePointerToken, type ConfigProblem } from './config-problem.js';

/**
 * `${NAME}` and `${NAME:-default}` in string values, replaced from the environment; `$${` is a
 * literal `${`. As in a POSIX shell, `${NAME:-default}` takes the default when NAME is unset or
 * empty, and `${NAME}` of an empty NAME is empty. An unset variable with no default is a problem naming the variable and the value's JSON pointer. Keys are never substituted, and neither
 * is the text a substitution brings in (a value is read once, left to right).
 */
const REFERENCE = /\$\$\{|\$\{([^}]*)\}/g;
const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const LITERAL = /\$\$\{/g;

/** A string value that took a variable's value: the file's text, what it became, and the variables whose values it took. */
export interface Substitution {
  template: string;
  value: string;
  /** Each variable used, with its value (a default written in the file is not one). */
  variables: Array<{ name: string; value: string }>;
}

export interface Substituted {
  value: unknown;
  problems: ConfigProblem[];
  /** By JSON pointer: the values that hold a variable's value, which messages must not show (redact.ts). */
  substitutions: Map<string, Substitution>;
}

export function substituteEnv(value: unknown, env: NodeJS.ProcessEnv): Substituted {
  const problems: ConfigProblem[] = [];
  const substitutions = new Map<string, Substitution>();
  return { value: walk(value, '', env, { problems, substitutions }), problems, substitutions };
}

interface Found {
  problems: ConfigProblem[];
  substitutions: Map<string, Substitution>;
}

function walk(value: unknown, pointer: string, env: NodeJS.ProcessEnv, found: Found): unknown {
  if (typeof value === 'string') return value.includes('${') ? substitute(value, pointer, env, found) : value;
  if (Array.isArray(value)) return value.map((item, i) => walk(item, `${pointer}/${i}`, env, found));
  if (typeof value === 'object' && value !== null) {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      // defineProperty: a key named __proto__ stays an own key (the schema then refuses it by name).
      Object.defineProperty(out, key, { value: walk(item, `${pointer}/${escapePointerToken(key)}`, env, found), enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  return value;
}

function substitute(template: string, pointer: string, env: NodeJS.ProcessEnv, found: Found): string {
  const variables: Substitution['variables'] = [];
  const value = replaceReferences(template, pointer, env, found.problems, variables);
  if (variables.length > 0) found.substitutions.set(pointer, { template, value, variables });
  return value;
}

function replaceReferences(text: string, pointer: string, env: NodeJS.ProcessEnv, problems: ConfigProblem[], variables: Substitution['variables']): string {
  // Past the last "}" no reference can close: there only "$${" means anything. Left to REFERENCE, each
  // "${" there would scan to the end of the text (100,000 of them took 9 s).
  const end = text.lastIndexOf('}') + 1;
  if (end < text.length) return replaceReferences(text.slice(0, end), pointer, env, problems, variables) + text.slice(end).replace(LITERAL, '${');
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
    if (split >= 0 && (set === undefined || set === '')) return inner.slice(split + 2);
    if (set !== undefined) {
      variables.push({ name, value: set });
      return set;
    }
    problems.push({ pointer, reason: `environment variable ${name} is not set and \${${name}} has no default (write \${${name}:-default} to give one)` });
    return match;
  });
}
