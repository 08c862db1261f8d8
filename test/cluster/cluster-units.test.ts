// The process model's pure pieces: crash-loop back-off and the readiness rule.
import t from 'tap';
import { respawnDelay, type WorkerSlot } from '../../src/cluster/supervisor.js';
import { componentStates, isOperational } from '../../src/cluster/readiness.js';
import { CacheEpochs } from '../../src/cluster/cache-epochs.js';
import type { GatewayConfig } from '../../src/config/types.js';
import type { MiddlewareConfig } from '../../src/middleware/registry.js';

t.test('respawn back-off: none after one exit, then doubling up to the cap', async (t) => {
  t.same([1, 2, 3, 4, 5].map((n) => respawnDelay(n, 250, 30_000)), [0, 250, 500, 1000, 2000]);
  t.equal(respawnDelay(30, 250, 30_000), 30_000);
  t.equal(respawnDelay(0, 250, 30_000), 0);
});

function slot(index: number, tableVersion: number | null, listeners: string[] = ['accessLog'], alive = true, middleware: string[] = [], failingListeners: string[] = []): WorkerSlot {
  return {
    index,
    worker: alive ? ({} as WorkerSlot['worker']) : null,
    greeted: alive,
    startedAt: 0,
    quickExits: 0,
    respawnTimer: null,
    tableVersion,
    listeners,
    failingListeners,
    middleware,
  };
}

const none = { pending: [], ready: [] };

t.test('listeners are ready only when every worker slot has initialized them', async (t) => {
  t.same(componentStates(['accessLog'], [slot(0, 1), slot(1, 1)], 'listeners'), { pending: [], ready: ['accessLog'] });
  t.same(componentStates(['accessLog'], [slot(0, 1), slot(1, 1, [])], 'listeners'), { pending: ['accessLog'], ready: [] });
  t.same(componentStates(['accessLog'], [slot(0, 1), slot(1, null, ['accessLog'], false)], 'listeners'), { pending: ['accessLog'], ready: [] });
  t.same(componentStates([], [slot(0, 1)], 'listeners'), none);
});

t.test('a ready listener one worker reports failing is failing, not ready (and not pending)', async (t) => {
  const failingOnOne = [slot(0, 1), slot(1, 1, ['accessLog', 'shadow'], true, [], ['accessLog'])];
  t.same(componentStates(['accessLog', 'shadow'], failingOnOne, 'listeners'), { pending: ['shadow'], ready: [], failing: ['accessLog'] });
  t.same(componentStates(['accessLog'], failingOnOne, 'listeners'), { pending: [], ready: [], failing: ['accessLog'] });
});

t.test('middleware likewise, by the ids each worker reported ready', async (t) => {
  const both = [slot(0, 1, [], true, ['auth', 'limit']), slot(1, 1, [], true, ['auth'])];
  t.same(componentStates(['auth', 'limit'], both, 'middleware'), { pending: ['limit'], ready: ['auth'] });
});

t.test('operational once every slot listens with the complete current table', async (t) => {
  const listeners = { pending: [], ready: ['accessLog'] };
  const ready = { slots: [slot(0, 3), slot(1, 3)], tableVersion: 3, tableComplete: true, listeners, middleware: none };
  t.ok(isOperational(ready));
  t.notOk(isOperational({ ...ready, tableComplete: false }), 'an upstream is still being discovered');
  t.notOk(isOperational({ ...ready, slots: [slot(0, 3), slot(1, 2)] }), 'a worker still has an older table');
  t.notOk(isOperational({ ...ready, slots: [slot(0, 3), slot(1, null, [], false)] }), 'a worker slot is empty');
  t.notOk(isOperational({ ...ready, slots: [] }), 'no workers at all');
  t.notOk(isOperational({ ...ready, tableVersion: null }), 'nothing published yet');
  t.notOk(isOperational({ ...ready, listeners: { pending: ['accessLog'], ready: [] } }), 'a listener is pending');
  t.notOk(isOperational({ ...ready, middleware: { pending: ['auth'], ready: [] } }), 'a middleware is pending');
});

t.test('cache epochs: an id kept keeps its epoch; one that comes back after a config without it gets a new one; other stores are left alone', async (t) => {
  const epochs = new CacheEpochs();
  const cache = (id: string, store = 'local') => ({ id, type: 'responseCache', store }) as unknown as MiddlewareConfig;
  const config = (...middleware: MiddlewareConfig[]) => ({ middleware }) as unknown as GatewayConfig;
  const epochOf = (stamped: GatewayConfig, id: string) => (stamped.middleware.find((m) => m.id === id) as { storeEpoch?: number }).storeEpoch;
  const first = epochs.stamp(config(cache('c1'), cache('r', 'redis-main')));
  t.equal(epochOf(first, 'c1'), 0, 'first seen: epoch 0, the id alone names the store');
  t.equal(epochOf(first, 'r'), undefined, 'a remote store is not stamped');
  t.equal(epochOf(epochs.stamp(config(cache('c1'))), 'c1'), 0, 'kept: the same epoch (and entries)');
  const renamed = epochs.stamp(config(cache('c2')));
  t.equal(epochOf(renamed, 'c2'), 0, 'renamed to a new id: that id is new');
  const back = epochs.stamp(config(cache('c1')));
  t.ok(epochOf(back, 'c1')! > 0, 'c1 back after a config without it: a new epoch, an empty store');
  t.equal(epochOf(epochs.stamp(config(cache('c1'))), 'c1'), epochOf(back, 'c1'), 'and it keeps that one from then on');
  const again = epochs.stamp(config(cache('c2')));
  t.ok(epochOf(again, 'c2')! > 0 && epochOf(again, 'c2') !== epochOf(back, 'c1'), 'c2 back: another new epoch');
  const plain = config();
  t.equal(epochs.stamp(plain), plain, 'no middleware: the config as it is');
});
