import { startDataPlane } from '../../src/proxy/data-plane.js';
import type { DataPlane, DataPlaneOptions } from '../../src/proxy/data-plane-types.js';
import { RoutingTable } from '../../src/routing/table.js';
import type { RouteEntry } from '../../src/routing/types.js';
import { testConfig, type ConfigOverrides } from './upstream-server.js';

export interface PlaneOptions extends Omit<DataPlaneOptions, 'config'> {
  /** Merged into testConfig() beside the one static upstream. */
  config?: ConfigOverrides;
}

/**
 * A data plane in this process in front of one static upstream (`upstreamUrl`), routing `routes`
 * (entry() of that upstream), closed when the test ends.
 */
export async function planeInFrontOf(
  t: { teardown(fn: () => unknown): void },
  upstreamUrl: string,
  routes: RouteEntry[],
  options: PlaneOptions = {},
): Promise<DataPlane> {
  const { config, ...rest } = options;
  const plane = await startDataPlane({
    ...rest,
    config: testConfig({ upstreams: [{ serviceType: 'static', serviceLocation: upstreamUrl, weight: 1, specPath: '/spec' }], ...config }),
  });
  t.teardown(() => plane.close());
  const { table, problems } = RoutingTable.compile(routes);
  if (problems.length > 0) throw new Error(`the test's routes do not compile: ${JSON.stringify(problems)}`);
  plane.setTable(table);
  return plane;
}
