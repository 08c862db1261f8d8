import { createRequire } from 'node:module';
import { duplicateKeys, type DuplicateKeys } from './duplicate-keys.js';

// yaml is loaded at the first doc that is not JSON: JSON docs and static upstreams have no use for it.
// With the lazy schema check (schema-objections.ts), importing the primary's modules went from
// 368-443 ms to 308-325 ms.
const require = createRequire(import.meta.url);
type Yaml = typeof import('yaml');
let yaml: Yaml | undefined;
type YamlOptions = import('yaml').ParseOptions & import('yaml').DocumentOptions & import('yaml').SchemaOptions & import('yaml').ToJSOptions;
const parseYaml = (text: string, options: YamlOptions): unknown => (yaml ??= require('yaml') as Yaml).parse(text, options);

/**
 * What a doc's text turned out to be: a JSON or YAML value, or why it is neither. A JSON one says which
 * keys it held twice (JSON.parse keeps the last of each, silently).
 */
export type ParsedText = { ok: true; format: 'JSON' | 'YAML'; value: unknown; duplicates?: DuplicateKeys } | { ok: false; reason: string };

/**
 * Reads a doc's text as JSON or YAML, by its content: services serve YAML as `text/plain`,
 * `application/octet-stream` or with no Content-Type at all, and JSON as YAML's types, so the header is
 * only quoted in errors. JSON is tried first (it is the common case, and JSON.parse is much the faster);
 * YAML (1.2, which reads JSON too) second. A text that YAML reads as a lone scalar — an HTML page, a
 * "Not Found" line — is neither: no doc is a scalar.
 */
export function parseDocText(text: string): ParsedText {
  const body = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  const start = body.trimStart();
  if (start === '') return { ok: false, reason: 'it is empty' };
  if (start.startsWith('<')) return { ok: false, reason: `it looks like HTML or XML (it starts with ${preview(start)})` };
  let jsonError: string | undefined;
  if (start.startsWith('{') || start.startsWith('[')) {
    let value: unknown;
    try {
      value = JSON.parse(body);
    } catch (error) {
      jsonError = (error as Error).message;
    }
    if (jsonError === undefined) return { ok: true, format: 'JSON', value, duplicates: duplicateKeys(body, value) };
  }
  let value: unknown;
  try {
    // Duplicate keys keep the last one, as JSON.parse does; `<<` merge keys are read, as YAML 1.1 did.
    value = parseYaml(body, { uniqueKeys: false, merge: true, logLevel: 'error' });
  } catch (error) {
    const yamlError = firstLine((error as Error).message);
    return { ok: false, reason: jsonError === undefined ? `YAML: ${yamlError}` : `JSON: ${jsonError}; YAML: ${yamlError}` };
  }
  if (value === null || typeof value !== 'object') {
    return { ok: false, reason: `it is a single ${value === null ? 'null' : typeof value} (it starts with ${preview(start)})` };
  }
  if (refersToItself(value, new Set())) return { ok: false, reason: 'YAML: an alias refers to its own anchor, which no JSON value can' };
  return { ok: true, format: 'YAML', value };
}

/** A YAML alias inside its own anchor's node makes a cycle; nothing downstream (cloning, JSON) takes one. */
function refersToItself(value: unknown, ancestors: Set<object>): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (ancestors.has(value)) return true;
  ancestors.add(value);
  for (const child of Object.values(value)) if (refersToItself(child, ancestors)) return true;
  ancestors.delete(value);
  return false;
}

function firstLine(message: string): string {
  return message.split('\n')[0]!.trim();
}

/** The first characters of a text, quoted, on one line: enough to recognize a login page or an error. */
function preview(text: string): string {
  const line = text.slice(0, 60).replace(/\s+/g, ' ');
  return JSON.stringify(text.length > 60 ? `${line}...` : line);
}
