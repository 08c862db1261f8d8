// UpstreamRegistry.refresh / unchangedFrom / inherit and the Rediscovery sweep, with a fake discover function.
import t from 'tap';
import type { UpstreamConfig } from '../../src/config/types.js';
import type { DiscoveredUpstream } from '../../src/discovery/index.js';
import type { Logger } from '../../src/log.js';
import { Rediscovery } from '../../src/cluster/rediscovery.js';
import { UpstreamRegistry, type DiscoverFn } from '../../src/cluster/discovered-upstreams.js';

/** Polls `done` every 10 ms for up to 3 s: timers fire late on a busy host, so the tests wait for
 * what they assert on rather than a fixed time. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 300 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
}

function fakeLog(): Logger & { said: string[] } {
  const said: string[] = [];
  const record = (...args: unknown[]) => void said.push(String(args.find((a) => typeof a === 'string') ?? ''));
  return { said, info: record, warn: record, error: record, debug: record } as unknown as Logger & { said: string[] };
}

const swagger = (location: string, extra: Partial<UpstreamConfig> = {}): UpstreamConfig => ({
  serviceType: 'swagger2',
  serviceLocation: location,
  weight: 1,
  specPath: '/spec',
  ...extra,
});

function discovered(config: UpstreamConfig, templates: string[]): DiscoveredUpstream {
  return {
    upstream: config,
    entries: templates.map((template) => ({
      method: 'GET',
      template,
      upstream: config.serviceLocation,
      consumes: [],
      produces: [],
      disabledMiddleware: [],
      disabledListeners: [],
    })),
    doc: { paths: templates },
  };
}

const OPTIONS = { fetchTimeoutMs: 100, retries: 0, backoffMs: 0 };
const DISCOVERY = { ...OPTIONS, refreshIntervalMs: 20 };

t.test('refresh: unchanged, changed, failing, recovered', async (t) => {
  const config = swagger('http://a:1');
  const registry = new UpstreamRegistry([config]);
  const record = registry.records[0]!;
  record.state = 'ready';
  record.discovered = discovered(config, ['/x']);
  const log = fakeLog();
  let answer: DiscoveredUpstream | Error = discovered(config, ['/x']);
  const discover: DiscoverFn = async () => {
    if (answer instanceof Error) throw answer;
    return answer;
  };

  t.equal(await registry.refresh(record, discover, OPTIONS, log), false, 'the same doc changes nothing');
  answer = discovered(config, ['/x', '/y']);
  t.equal(await registry.refresh(record, discover, OPTIONS, log), true, 'a new endpoint is a change');
  t.equal(record.discovered!.entries.length, 2);

  answer = new Error('HTTP 500');
  t.equal(await registry.refresh(record, discover, OPTIONS, log), false);
  t.equal(await registry.refresh(record, discover, OPTIONS, log), false);
  t.match(record, { state: 'ready', lastError: 'HTTP 500' }, 'a failing doc keeps the upstream ready, with the reason');
  t.equal(record.discovered!.entries.length, 2, 'and its last known endpoints');
  t.equal(log.said.filter((s) => /re-discovery failed/.test(s)).length, 1, 'the same reason is logged once');

  answer = discovered(config, ['/x', '/y']);
  t.equal(await registry.refresh(record, discover, OPTIONS, log), false, 'back with the same doc: nothing to publish');
  t.notOk('lastError' in record, 'the reason is cleared');

  record.state = 'failed';
  t.equal(await registry.refresh(record, discover, OPTIONS, log), true, 'a failed upstream that answers is a change');
  t.equal(record.state, 'ready');
});

t.test('refresh after abort touches nothing', async (t) => {
  const config = swagger('http://a:1');
  const registry = new UpstreamRegistry([config]);
  const record = registry.records[0]!;
  record.state = 'failed';
  const controller = new AbortController();
  const discover: DiscoverFn = async () => {
    controller.abort();
    return discovered(config, ['/x']);
  };
  t.equal(await registry.refresh(record, discover, { ...OPTIONS, signal: controller.signal }, fakeLog()), false);
  t.equal(record.state, 'failed');
});

t.test('unchangedFrom pairs upstreams whose doc source did not change; inherit takes over their state as it is', async (t) => {
  const a = swagger('http://a:1');
  const b = swagger('http://b:1');
  const c = swagger('http://c:1');
  const p = swagger('http://p:1');
  const before = new UpstreamRegistry([a, b, c, p]);
  for (const record of before.records.slice(0, 3)) {
    record.state = 'ready';
    record.discovered = discovered(record.config, ['/x']);
  }
  before.records[2]!.state = 'failed';
  before.records[2]!.lastError = 'connect ECONNREFUSED';
  // p stays pending: its first discovery is still running.
  let release: (d: DiscoveredUpstream) => void = () => {};
  let aborted = false;
  const discover: DiscoverFn = (config, options) =>
    config.serviceLocation === p.serviceLocation
      ? new Promise((resolve) => {
          release = resolve;
          options.signal?.addEventListener('abort', () => (aborted = true));
        })
      : Promise.resolve(discovered(config, ['/x']));
  const beforeDiscovery = before.discoverAll(discover, { ...OPTIONS, refreshIntervalMs: 0 }, fakeLog(), new AbortController().signal);

  const after = new UpstreamRegistry([{ ...a, weight: 5 }, { ...b, specPath: '/v2/spec' }, c, p, swagger('http://d:1')]);
  const pairs = after.unchangedFrom(before);
  t.same([...pairs.keys()].map((r) => r.config.serviceLocation), ['http://a:1', 'http://c:1', 'http://p:1'], 'a weight change alone is unchanged');
  const controller = new AbortController();
  const followed = after.inherit(before, pairs, controller.signal);
  t.same(
    after.records.map((r) => r.state),
    ['ready', 'pending', 'failed', 'pending', 'pending'],
    'ready, failed and pending are taken over as they are; changed and new upstreams stay to discover',
  );
  t.equal(after.records[0]!.discovered!.upstream.weight, 5, 'the inherited upstream carries its new config');
  t.equal(after.records[2]!.lastError, 'connect ECONNREFUSED');
  t.same([...followed].map((r) => r.config.serviceLocation), ['http://p:1'], 'the pending one follows the discovery running for it');

  const settled: string[] = [];
  after.on('settled', (record) => settled.push(record.config.serviceLocation));
  before.abortFetchesExcept(followed);
  t.equal(aborted, false, 'a followed discovery is not aborted with the replaced registry');
  release(discovered(p, ['/p']));
  await beforeDiscovery;
  t.same(settled, ['http://p:1'], 'settles in the new registry when it settles in the old');
  t.equal(after.records[3]!.state, 'ready');
  t.equal(after.records[3]!.discovered!.entries[0]!.template, '/p');
});

t.test('inherit: aborting the new registry aborts the discovery it follows', async (t) => {
  const p = swagger('http://p:1');
  const before = new UpstreamRegistry([p]);
  let aborted = false;
  const discover: DiscoverFn = (config, options) =>
    new Promise((resolve, reject) => options.signal?.addEventListener('abort', () => ((aborted = true), reject(new Error('aborted')))));
  const running = before.discoverAll(discover, { ...OPTIONS, refreshIntervalMs: 0 }, fakeLog(), new AbortController().signal);
  const after = new UpstreamRegistry([p]);
  const controller = new AbortController();
  after.inherit(before, after.unchangedFrom(before), controller.signal);
  controller.abort();
  await running;
  t.equal(aborted, true);
  t.equal(after.records[0]!.state, 'pending');
});

t.test('Rediscovery re-fetches settled, non-static upstreams; never overlaps; stop() ends it', async (t) => {
  const doc = swagger('http://a:1');
  const registry = new UpstreamRegistry([doc, { ...swagger('http://s:1'), serviceType: 'static' }, swagger('http://p:1')]);
  registry.records[0]!.state = 'ready';
  registry.records[0]!.discovered = discovered(doc, ['/x']);
  registry.records[1]!.state = 'ready';
  // records[2] stays pending: its first discovery is still running.
  const fetched: string[] = [];
  let running = 0;
  let overlapped = false;
  const discover: DiscoverFn = async (config) => {
    fetched.push(config.serviceLocation);
    overlapped ||= ++running > 1;
    await new Promise((resolve) => setTimeout(resolve, 40)); // slower than the interval
    running--;
    return discovered(config, fetched.length >= 2 ? ['/x', '/y'] : ['/x']);
  };
  const sweeps: boolean[] = [];
  const rediscovery = new Rediscovery({ registry, discovery: DISCOVERY, discover, log: fakeLog(), onRefreshed: (changed) => sweeps.push(changed) }).start();
  await until(() => sweeps.length >= 2);
  rediscovery.stop();
  const count = sweeps.length;
  t.ok(count >= 2, `re-fetched repeatedly (${count})`);
  t.same(sweeps.slice(0, 2), [false, true], 'only a re-fetch that changed something asks for a publish');
  t.same([...new Set(fetched)], ['http://a:1'], 'pending and static upstreams are not fetched');
  t.notOk(overlapped, "an upstream's fetch starts only after its previous one ended");
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.equal(sweeps.length, count, 'nothing after stop()');
});

t.test('refreshIntervalMs 0 never re-fetches', async (t) => {
  const registry = new UpstreamRegistry([swagger('http://a:1')]);
  registry.records[0]!.state = 'failed';
  let calls = 0;
  const rediscovery = new Rediscovery({
    registry,
    discovery: { ...DISCOVERY, refreshIntervalMs: 0 },
    discover: async () => {
      calls++;
      throw new Error('no');
    },
    log: fakeLog(),
    onRefreshed: () => {},
  }).start();
  await new Promise((resolve) => setTimeout(resolve, 60));
  rediscovery.stop();
  t.equal(calls, 0);
});

t.test("an upstream whose fetch hangs holds back no other upstream's change", async (t) => {
  const slow = swagger('http://slow:1');
  const quick = swagger('http://quick:1');
  const registry = new UpstreamRegistry([slow, quick]);
  for (const [i, config] of [slow, quick].entries()) {
    registry.records[i]!.state = 'ready';
    registry.records[i]!.discovered = discovered(config, ['/x']);
  }
  let quickFetches = 0;
  const discover: DiscoverFn = (config, options) => {
    // The slow doc answers only when re-discovery stops (the abort), like a fetch timing out much later.
    if (config === slow) return new Promise((_, reject) => options.signal?.addEventListener('abort', () => reject(new Error('aborted'))));
    quickFetches++;
    return Promise.resolve(discovered(config, quickFetches >= 2 ? ['/x', '/y'] : ['/x']));
  };
  const changes: number[] = [];
  const started = Date.now();
  const rediscovery = new Rediscovery({
    registry,
    discovery: DISCOVERY,
    discover,
    log: fakeLog(),
    onRefreshed: (changed) => {
      if (changed) changes.push(Date.now() - started);
    },
  }).start();
  await until(() => changes.length >= 1 && quickFetches >= 5);
  rediscovery.stop();
  t.ok(changes.length >= 1, `the quick upstream's change was published while the slow fetch hung (after ${changes[0]} ms)`);
  t.ok(quickFetches >= 5, `and it kept being fetched every interval (${quickFetches} fetches, interval 20 ms)`);
  t.same(registry.records[1]!.discovered!.entries.map((e) => e.template), ['/x', '/y']);
});

t.test('upstreams that answer together make one publish', async (t) => {
  const configs = [swagger('http://a:1'), swagger('http://b:1'), swagger('http://c:1')];
  const registry = new UpstreamRegistry(configs);
  for (const [i, config] of configs.entries()) {
    registry.records[i]!.state = 'ready';
    registry.records[i]!.discovered = discovered(config, ['/x']);
  }
  const calls: boolean[] = [];
  const rediscovery = new Rediscovery({
    registry,
    discovery: { ...DISCOVERY, refreshIntervalMs: 50 },
    discover: async (config) => discovered(config, ['/x', '/changed']),
    log: fakeLog(),
    onRefreshed: (changed) => calls.push(changed),
  }).start();
  await until(() => calls.length >= 1);
  rediscovery.stop();
  t.equal(calls[0], true, 'the first publish says something changed');
  t.equal(calls.filter(Boolean).length, 1, 'three changed docs, one publish');
});

t.test('discovering more than 10 upstreams at once on one signal: no MaxListenersExceededWarning', async (t) => {
  const configs = Array.from({ length: 24 }, (_, i) => swagger(`http://u${i}:1`));
  const registry = new UpstreamRegistry(configs);
  const warnings: string[] = [];
  const onWarning = (warning: Error): void => void warnings.push(warning.name);
  process.on('warning', onWarning);
  t.teardown(() => void process.off('warning', onWarning));
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const discover: DiscoverFn = async (config) => {
    await gate;
    return discovered(config, ['/x']);
  };
  const all = registry.discoverAll(discover, DISCOVERY, fakeLog(), new AbortController().signal);
  // Every discovery waits with its abort listener on the signal; warnings are emitted on the next tick.
  await new Promise((resolve) => setImmediate(resolve));
  release();
  await all;
  await new Promise((resolve) => setImmediate(resolve));
  t.same(warnings.filter((name) => name === 'MaxListenersExceededWarning'), [], 'no warning');
  t.equal(registry.ready().length, 24, 'all discovered');
});
