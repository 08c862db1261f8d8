import { RoutingOracle } from '../../src/routing/oracle.js';
import { RoutingTable } from '../../src/routing/table.js';
import { parseTemplate } from '../../src/routing/template.js';
import type { RouteEntry } from '../../src/routing/types.js';

export function entry(method: string, template: string, upstream = 'http://127.0.0.1:9001', extra: Partial<RouteEntry> = {}): RouteEntry {
  return { method, template, upstream, consumes: [], produces: [], disabledMiddleware: [], disabledListeners: [], ...extra };
}

export function compile(entries: RouteEntry[]): RoutingTable {
  const { table, problems } = RoutingTable.compile(entries);
  if (problems.length > 0) throw new Error(problems.map((p) => p.message).join('\n'));
  return table;
}

/** The oracle over the entries that parse (the table reports the rest as problems). */
export function oracleFor(entries: RouteEntry[]): RoutingOracle {
  const parsed = [];
  for (const e of entries) {
    try {
      parsed.push({ method: e.method.toUpperCase(), template: parseTemplate(e.template) });
    } catch {
      // a problem template: the table skips it too
    }
  }
  return new RoutingOracle(parsed);
}

/** Which template (as declared) serves GET `path`, or null. */
export function winner(table: RoutingTable, path: string, method = 'GET'): string | null {
  return table.select(method, path, undefined, undefined, false).route?.template ?? null;
}
