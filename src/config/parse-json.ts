import jsonc from 'jsonc-parser';
import { escapePointerToken, type ConfigProblem } from './config-problem.js';

/**
 * Parses a config file's text: JSON, plus `//` and `/* *\/` comments so shipped configs can explain
 * themselves. Trailing commas are refused, and so are duplicate keys, which plain JSON.parse would
 * silently resolve by keeping the last one.
 */
export function parseConfigText(text: string): { value: unknown } | { problem: ConfigProblem } {
  const body = text.startsWith('\uFEFF') ? text.slice(1) : text;
  if (body.trim() === '') return { problem: { pointer: '', reason: 'the file is empty; it must hold a JSON object' } };

  const errors: jsonc.ParseError[] = [];
  const tree = jsonc.parseTree(body, errors, { disallowComments: false, allowTrailingComma: false });
  if (errors.length > 0 || tree === undefined) {
    const first = errors[0] ?? { error: jsonc.ParseErrorCode.ValueExpected, offset: 0, length: 0 };
    return { problem: { pointer: '', ...position(body, first.offset), reason: `invalid JSON: ${describeSyntaxError(body, first)}` } };
  }
  const duplicate = findDuplicateKey(tree, '');
  if (duplicate) return { problem: duplicate(body) };
  return { value: toValue(tree) };
}

/**
 * Why bytes that look like UTF-16 text cannot be read, or null: a UTF-16 byte order mark, or the NUL
 * bytes every ASCII character of UTF-16 has (editors on Windows save "Unicode" as UTF-16 LE). Read as
 * UTF-8 they were "invalid symbol" at 1:1.
 */
export function utf16Problem(bytes: Uint8Array): string | null {
  const [a, b] = [bytes[0], bytes[1]];
  let order: string | null = null;
  if (a === 0xff && b === 0xfe) order = 'little-endian, with a byte order mark';
  else if (a === 0xfe && b === 0xff) order = 'big-endian, with a byte order mark';
  else if (bytes.length >= 2 && a !== 0 && b === 0) order = 'little-endian';
  else if (bytes.length >= 2 && a === 0 && b !== 0) order = 'big-endian';
  return order === null ? null : `the file looks like UTF-16 (${order}); it must be UTF-8: save it as UTF-8 (or convert it: iconv -f UTF-16 -t UTF-8)`;
}

function position(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  const column = offset - (before.lastIndexOf('\n') + 1) + 1;
  return { line, column };
}

function describeSyntaxError(text: string, error: jsonc.ParseError): string {
  const found = text[error.offset];
  const previous = text.slice(0, error.offset).replace(/\s+$/, '').slice(-1);
  if ((found === '}' || found === ']') && previous === ',') return `trailing comma before "${found}"`;
  const words = jsonc
    .printParseErrorCode(error.error)
    .replace(/([a-z])([A-Z])/g, '$1 $2')
    .toLowerCase();
  return found === undefined ? `${words} (the file ends too early)` : `${words}, found ${JSON.stringify(found)}`;
}

function findDuplicateKey(node: jsonc.Node, pointer: string): ((text: string) => ConfigProblem) | undefined {
  if (node.type === 'object') {
    const seen = new Map<string, number>();
    for (const property of node.children ?? []) {
      const [keyNode, valueNode] = property.children ?? [];
      if (keyNode === undefined) continue;
      const key = String(keyNode.value);
      const childPointer = `${pointer}/${escapePointerToken(key)}`;
      const firstOffset = seen.get(key);
      if (firstOffset !== undefined) {
        return (text) => ({
          pointer: childPointer,
          ...position(text, keyNode.offset),
          reason: `duplicate key "${key}" on line ${position(text, keyNode.offset).line} (first on line ${position(text, firstOffset).line}); JSON would silently keep the last one`,
        });
      }
      seen.set(key, keyNode.offset);
      if (valueNode) {
        const found = findDuplicateKey(valueNode, childPointer);
        if (found) return found;
      }
    }
  } else if (node.type === 'array') {
    const items = node.children ?? [];
    for (let i = 0; i < items.length; i++) {
      const found = findDuplicateKey(items[i]!, `${pointer}/${i}`);
      if (found) return found;
    }
  }
  return undefined;
}

/** Builds the value with own properties only, so a `__proto__` key is an ordinary (refused) key. */
function toValue(node: jsonc.Node): unknown {
  switch (node.type) {
    case 'object':
      return Object.fromEntries((node.children ?? []).map((p) => [String(p.children![0]!.value), toValue(p.children![1]!)]));
    case 'array':
      return (node.children ?? []).map(toValue);
    default:
      return node.value;
  }
}
