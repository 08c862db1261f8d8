// config/README.md's reference table lists every key of the schema, with the schema's type, default
// and description; on a mismatch the expected row is printed, ready to paste.
import { readFileSync } from 'node:fs';
import t from 'tap';
import { configSchema } from '../../src/config/schema.js';

interface KeySchema {
  type?: string;
  enum?: readonly unknown[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  minItems?: number;
  default?: unknown;
  description?: string;
  required?: readonly string[];
  properties?: Record<string, KeySchema>;
  items?: KeySchema;
  /** A map's entries (kvStores: `{ "<name>": { ... } }`). */
  additionalProperties?: KeySchema | boolean;
  /** Per-type keys of a list's items (middleware): `{ if: { properties: { type: { const } } }, then }`. */
  allOf?: ReadonlyArray<{ if?: { properties?: { type?: { const?: string } } }; then?: KeySchema }>;
}

function typeOf(schema: KeySchema): string {
  if (schema.enum) return `one of ${schema.enum.map((v) => JSON.stringify(v)).join(', ')}`;
  if (schema.type === 'integer') {
    if (schema.minimum !== undefined && schema.maximum !== undefined) return `integer ${schema.minimum}–${schema.maximum}`;
    if (schema.minimum !== undefined) return `integer ≥ ${schema.minimum}`;
    return 'integer';
  }
  if (schema.type === 'array') return `${schema.minItems ? 'non-empty ' : ''}array of ${schema.items?.type ?? 'value'}s`;
  if (Array.isArray(schema.type)) return schema.type.join(' or ');
  if (schema.type === 'string' && schema.minLength) return 'non-empty string';
  return schema.type ?? 'any';
}

function defaultOf(schema: KeySchema, required: boolean): string {
  if (required) return 'required';
  return 'default' in schema ? `\`${JSON.stringify(schema.default)}\`` : '—';
}

/** The rows the table should have, by key path (`a.b`, `list[].key`), in schema order. */
function expectedRows(): Map<string, string> {
  const rows = new Map<string, string>();
  const walk = (schema: KeySchema, prefix: string): void => {
    const required = new Set(schema.required ?? []);
    for (const [key, child] of Object.entries(schema.properties ?? {})) {
      const path = prefix + key;
      const meaning = (child.description ?? '').replaceAll('|', '\\|');
      rows.set(path, `| \`${path}\` | ${typeOf(child)} | ${defaultOf(child, required.has(key))} | ${meaning} |`);
      walk(child, `${path}.`);
      if (child.items?.properties) walk(child.items, `${path}[].`);
      if (typeof child.additionalProperties === 'object' && child.additionalProperties.properties) walk(child.additionalProperties, `${path}.<name>.`);
      // Keys of one type only: middleware[apiKeyAuth].header (the common ones are listed once, above).
      for (const branch of child.items?.allOf ?? []) {
        const type = branch.if?.properties?.type?.const;
        if (type === undefined || branch.then === undefined) continue;
        const common = new Set(Object.keys(child.items?.properties ?? {}));
        const own = Object.fromEntries(Object.entries(branch.then.properties ?? {}).filter(([key]) => !common.has(key)));
        walk({ ...branch.then, properties: own }, `${path}[${type}].`);
      }
    }
  };
  walk(configSchema as unknown as KeySchema, '');
  return rows;
}

const readme = readFileSync(new URL('../../../config/README.md', import.meta.url), 'utf8');
const tableRows = new Map<string, string>();
for (const line of readme.split('\n')) {
  const key = /^\| `([^`]+)` \|/.exec(line)?.[1];
  if (key !== undefined) tableRows.set(key, line.trimEnd());
}

t.test('every schema key has its row', async (t) => {
  const expected = expectedRows();
  t.ok(expected.size > 40, `the schema walk found the keys (${expected.size})`);
  const missing = [...expected.keys()].filter((key) => !tableRows.has(key));
  t.same(missing, [], `rows to add:\n${missing.map((key) => expected.get(key)).join('\n')}`);
});

t.test('no row names a key the schema does not have', async (t) => {
  const expected = expectedRows();
  t.same([...tableRows.keys()].filter((key) => !expected.has(key)), []);
});

t.test("each row's type, default and meaning are the schema's", async (t) => {
  for (const [key, row] of expectedRows()) {
    if (tableRows.has(key)) t.equal(tableRows.get(key), row, key);
  }
});
