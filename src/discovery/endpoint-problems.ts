import { joinTemplate } from './base-path.js';
import { isObject, methodsOf, type DocKind, type Objection } from './objection.js';
import type { EndpointProblem } from './types.js';
import { printable } from '../text/printable.js';

/**
 * Objections, said of the endpoints they concern: one inside an operation is that endpoint's; one on a
 * path item (its shared parameters, say) is each of its operations'; anything else is the doc's. The
 * reason starts with where, relative to what it is said of (`parameters/0: unknown field "nme"`).
 * Sorted as the doc lists its paths and methods, the doc's own first.
 */
export function endpointProblems(objections: readonly Objection[], doc: Record<string, any>, kind: DocKind, basePath: string): EndpointProblem[] {
  const paths: Record<string, unknown> = isObject(doc.paths) ? doc.paths : {};
  const pathOrder = new Map(Object.keys(paths).map((key, index) => [key, index]));
  const methods = methodsOf(kind);
  const problems: Array<EndpointProblem & { order: [number, number] }> = [];
  const seen = new Set<string>();
  const add = (method: string | null, pathKey: string | null, where: readonly string[], message: string): void => {
    // A doc's keys and values reach the log, the health report and the CLI: escaped (printable) here.
    const path = pathKey === null ? null : printable(joinTemplate(basePath, pathKey));
    const problem = { method: method?.toUpperCase() ?? null, path, reason: printable(located(where, message)) };
    const key = JSON.stringify(problem);
    if (seen.has(key)) return;
    seen.add(key);
    const order: [number, number] = [pathKey === null ? -1 : (pathOrder.get(pathKey) ?? -1), method === null ? -1 : methods.indexOf(method)];
    problems.push({ ...problem, order });
  };

  for (const { pointer, message } of objections) {
    const [section, pathKey, third] = pointer;
    if (section !== 'paths' || pathKey === undefined || !pathKey.startsWith('/')) {
      add(null, null, pointer, message);
    } else if (third !== undefined && methods.includes(third)) {
      add(third, pathKey, pointer.slice(3), message);
    } else {
      const pathItem = paths[pathKey];
      const operations = isObject(pathItem) ? methods.filter((m) => isObject(pathItem[m])) : [];
      const where = pointer.length > 2 ? ['path-level ' + pointer[2], ...pointer.slice(3)] : [];
      if (operations.length === 0) add(null, pathKey, where, message);
      for (const method of operations) add(method, pathKey, where, message);
    }
  }
  problems.sort((a, b) => a.order[0] - b.order[0] || a.order[1] - b.order[1]);
  return problems.map(({ method, path, reason }) => ({ method, path, reason }));
}

function located(where: readonly string[], message: string): string {
  return where.length === 0 ? message : `${where.join('/')}: ${message}`;
}
