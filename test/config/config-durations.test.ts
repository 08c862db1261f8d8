// Every duration of the config schema (a key ending in "Ms") has a maximum a running gateway honours: at
// most 2147483647 ms, the longest timer Node can set (a longer one fires after 1 ms), unless the key is a
// lifetime only compared with the clock (LIFETIMES; config-durations-run.test.ts runs them at their
// maximum). The schema is walked, so a new duration key is held to this without editing the test; a new
// middleware or listener type needs its minimal entry below.
import t from 'tap';
import { ConfigError, parseConfig } from '../../src/config/load.js';
import { configSchema } from '../../src/config/schema.js';
import { MAX_LIFETIME_MS, MAX_TIMER_MS } from '../../src/config/durations.js';
import { MAX_WINDOW_MS } from '../../src/stores/gcra.js';
import { gateway } from '../helpers/cli.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

interface Schema {
  type?: string | string[];
  minimum?: number;
  maximum?: number;
  properties?: Record<string, Schema>;
  items?: Schema & { allOf?: Array<{ if?: { properties?: { type?: { const?: string } } }; then?: Schema }> };
  additionalProperties?: Schema | boolean;
}

/** The least a list entry of each type needs to pass the config checks. */
const MINIMAL_ENTRIES: Record<string, Record<string, Record<string, unknown>>> = {
  middleware: {
    apiKeyAuth: { id: 'm', type: 'apiKeyAuth', keys: [] },
    rateLimit: { id: 'm', type: 'rateLimit', limit: 1, windowMs: 1000 },
    responseCache: { id: 'm', type: 'responseCache' },
  },
  listeners: {
    alternateUpstream: { id: 'l', type: 'alternateUpstream', serviceLocation: 'http://127.0.0.1:9', mismatchLog: null },
  },
};
const MINIMAL_MAP_ENTRIES: Record<string, Record<string, unknown>> = {
  kvStores: { type: 'redis', url: 'redis://127.0.0.1:6379' },
};
const MINIMAL_ITEMS: Record<string, Record<string, unknown>> = {
  upstreams: { serviceType: 'static', serviceLocation: 'http://127.0.0.1:9', endpoints: [{ method: 'GET', path: '/a' }] },
};

/** Durations only compared with the clock, never handed to a timer: their maximum, and why it may pass 2^31 - 1. */
const LIFETIMES: Record<string, number> = {
  'middleware[rateLimit].windowMs': MAX_WINDOW_MS, // GCRA arithmetic (src/stores/gcra.ts)
  'middleware[responseCache].defaultTtlMs': MAX_LIFETIME_MS, // an s-maxage, then an expiry time
  'middleware[responseCache].staleIfErrorMs': MAX_LIFETIME_MS, // compared with an entry's age
  'middleware[responseCache].heuristicMaxTtlMs': MAX_LIFETIME_MS, // caps a lifetime
};

interface Duration {
  name: string;
  pointer: string;
  schema: Schema;
  config(value: number): Record<string, unknown>;
}

function durations(): Duration[] {
  const found: Duration[] = [];
  const walk = (schema: Schema, name: string, pointer: string, wrap: (inner: Record<string, unknown>) => Record<string, unknown>): void => {
    for (const [key, child] of Object.entries(schema.properties ?? {})) {
      const at = (inner: unknown): Record<string, unknown> => wrap({ [key]: inner });
      if (key.endsWith('Ms')) {
        found.push({ name: `${name}${key}`, pointer: `${pointer}/${key}`, schema: child, config: (value) => at(value) });
        continue;
      }
      if (child.properties) walk(child, `${name}${key}.`, `${pointer}/${key}`, (inner) => at(inner));
      if (typeof child.additionalProperties === 'object') {
        const entry = MINIMAL_MAP_ENTRIES[key];
        if (entry === undefined) throw new Error(`add a minimal entry of ${name}${key} to MINIMAL_MAP_ENTRIES`);
        walk(child.additionalProperties, `${name}${key}.<name>.`, `${pointer}/${key}/s`, (inner) => at({ s: { ...entry, ...inner } }));
      }
      const branches = child.items?.allOf ?? [];
      for (const branch of branches) {
        const type = branch.if?.properties?.type?.const;
        if (type === undefined || branch.then === undefined) continue;
        const entry = MINIMAL_ENTRIES[key]?.[type];
        if (entry === undefined) throw new Error(`add a minimal ${key} entry of type ${type} to MINIMAL_ENTRIES`);
        walk(branch.then, `${name}${key}[${type}].`, `${pointer}/${key}/0`, (inner) => at([{ ...entry, ...inner }]));
      }
      if (branches.length === 0 && child.items?.properties) {
        const item = MINIMAL_ITEMS[key] ?? {};
        walk(child.items, `${name}${key}[].`, `${pointer}/${key}/0`, (inner) => at([{ ...item, ...inner }]));
      }
    }
  };
  walk(configSchema as unknown as Schema, '', '', (inner) => inner);
  return found;
}

function problemsOf(config: Record<string, unknown>): string[] {
  try {
    parseConfig(JSON.stringify(config), 'gateway.json');
    return [];
  } catch (error) {
    if (error instanceof ConfigError) return error.message.split('\n');
    throw error;
  }
}

const all = durations();

t.test('the walk finds the durations of every part of the schema', async (t) => {
  const names = all.map((d) => d.name);
  for (const name of ['timeouts.shutdownGraceMs', 'discovery.refreshIntervalMs', 'middleware[responseCache].lockTimeoutMs', 'listeners[alternateUpstream].timeoutMs', 'kvStores.<name>.breakerResetMs', 'websocket.idleTimeoutMs']) {
    t.ok(names.includes(name), name);
  }
  for (const name of Object.keys(LIFETIMES)) t.ok(names.includes(name), `lifetime ${name} is still in the schema`);
});

for (const duration of all) {
  t.test(duration.name, async (t) => {
    const { maximum, type } = duration.schema;
    t.equal(type, 'integer', 'a whole number of ms');
    const lifetime = LIFETIMES[duration.name];
    if (lifetime !== undefined) {
      t.equal(maximum, lifetime, 'a lifetime: bounded by what its arithmetic takes');
    } else {
      t.ok(maximum !== undefined && maximum <= MAX_TIMER_MS, `reaches a timer: its maximum (${maximum}) is at most ${MAX_TIMER_MS}`);
    }
    if (maximum === undefined) return;
    t.same(problemsOf(duration.config(maximum)), [], `${maximum} is accepted`);
    const refused = problemsOf(duration.config(maximum + 1));
    t.equal(refused.length, 1, refused.join('\n'));
    t.match(refused[0], `gateway.json: ${duration.pointer}: must be `, 'the file and the field');
    if (maximum === MAX_TIMER_MS) {
      t.equal(refused[0], `gateway.json: ${duration.pointer}: must be at most 2147483647 ms (24.8 days), the longest timer Node can set (got ${maximum + 1})`);
    }
  });
}

t.test('gateway check and gateway start refuse a duration no timer can wait', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'specgate-durations-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'gateway.json');
  writeFileSync(file, JSON.stringify({ port: 0, discovery: { refreshIntervalMs: 3_000_000_000 }, timeouts: { shutdownGraceMs: 2_592_000_000 } }));
  const check = await gateway('check', '--config', file);
  t.equal(check.code, 1);
  t.match(check.stderr, `error: ${file}: /discovery/refreshIntervalMs: must be at most 2147483647 ms (24.8 days), the longest timer Node can set (got 3000000000)\n`);
  t.match(check.stderr, `error: ${file}: /timeouts/shutdownGraceMs: must be at most 2147483647 ms (24.8 days), the longest timer Node can set (got 2592000000)\n`);
  const start = await gateway('start', '--config', file);
  t.equal(start.code, 1);
  t.match(start.stderr, `${file}: /discovery/refreshIntervalMs: must be at most 2147483647 ms`);
});
