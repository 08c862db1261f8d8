// Test support for the shared (LMDB) cache store used directly, without a gateway: an environment
// directory removed at the end, store events nobody listens to, and a storable answer.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StoredResponse } from '../../src/cache/record.js';
import { judge } from '../../src/cache/rules.js';
import type { Teardown } from './gateway-process.js';

/** A cache key as the responseCache makes them (origin and path, then the route template). */
export const KEY = 'http://gw/items/1 /items/{}';

export const NO_EVENTS = { added: (): void => {}, removed: (): void => {} };

const headers = ['cache-control', 'max-age=600'];
const policy = judge('/k', [], 200, headers, 0).policy!;

/** A directory for the stores' environment, removed at teardown. */
export function storeDir(t: Teardown, name: string): string {
  const dir = mkdtempSync(join(tmpdir(), `specgate-${name}-test-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** A 200 with `body`, fresh for 10 minutes, stored under `key`. */
export function storedResponse(body: string, key = KEY): StoredResponse {
  return new StoredResponse(200, headers, Buffer.from(body), policy, key, Date.now());
}
