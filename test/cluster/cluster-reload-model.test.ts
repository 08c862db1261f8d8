// The primary's reload state machine (Reloader) driven by random SIGHUP sequences (good, broken,
// quick, slow) against fake discovery, a fake publisher and fake worker replacement, with compile and
// worker-start failures thrown in. Whatever the sequence, once the doc fetches have answered: every
// upstream that serves is ready or failed, the state that serves is the one published (complete, so
// health reaches 200), the last SIGHUP got an outcome, and what serves is what that outcome says.
import t from 'tap';
import fc from 'fast-check';
import type { GatewayConfig, UpstreamConfig } from '../../src/config/types.js';
import type { DiscoveredUpstream } from '../../src/discovery/index.js';
import type { Logger } from '../../src/log.js';
import type { Published, PublishOutcome, PublishState } from '../../src/cluster/publisher.js';
import { Reloader, type PublishTarget, type ReloadResult, type WorkerReplacement } from '../../src/cluster/reloader.js';
import type { DiscoverFn } from '../../src/cluster/discovered-upstreams.js';
import { testConfig } from '../helpers/upstream-server.js';

const silentLog = (): Logger => {
  const nothing = (): void => {};
  return { info: nothing, warn: nothing, error: nothing, debug: nothing, level: 'info' } as unknown as Logger;
};

/** Lets every pending promise chain run (several turns of the event loop). */
async function settleDown(turns = 4): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise((resolve) => setImmediate(resolve));
}

const swagger = (location: string, specPath = '/spec'): UpstreamConfig => ({ serviceType: 'swagger2', serviceLocation: location, weight: 1, specPath });

/** The configs a SIGHUP may find in the file: different upstream sets, a changed doc source, a worker-start setting. */
const CONFIGS: GatewayConfig[] = [
  testConfig({ upstreams: [swagger('http://a:1'), swagger('http://b:1')] }),
  testConfig({ upstreams: [swagger('http://a:1'), swagger('http://b:1'), swagger('http://c:1')] }),
  testConfig({ upstreams: [swagger('http://b:1', '/v2/spec'), swagger('http://c:1')] }),
  testConfig({ name: 'renamed', upstreams: [swagger('http://a:1'), swagger('http://c:1')] }),
  testConfig({ name: 'renamed', upstreams: [swagger('http://a:1'), swagger('http://b:1')] }),
];
const INITIAL = CONFIGS[0]!;

interface Fetch {
  upstream: UpstreamConfig;
  signal: AbortSignal | undefined;
  done: boolean;
  answer(ok: boolean): void;
}

type Event =
  | { kind: 'sighup'; file: number | 'broken' }
  | { kind: 'load'; file: number | 'broken'; serving: GatewayConfig }
  | { kind: 'outcome'; result: ReloadResult; serving: GatewayConfig };

/** Everything around a Reloader, faked, with a record of what happened. */
class World {
  file: number | 'broken' = 0;
  readonly fetches: Fetch[] = [];
  readonly events: Event[] = [];
  readonly problems: string[] = [];
  failCompiles = 0;
  failReplaceAtSlot: number | null = null;
  replacing = false;
  applied = 0;
  stopped = false;
  readonly publisher: FakePublisher;
  readonly reloader: Reloader;

  constructor() {
    this.publisher = new FakePublisher(this);
    const discover: DiscoverFn = (upstream, options) =>
      new Promise<DiscoveredUpstream>((resolve, reject) => {
        const fetch: Fetch = {
          upstream,
          signal: options.signal,
          done: false,
          answer: (ok) => {
            if (fetch.done) return;
            fetch.done = true;
            if (ok) resolve({ upstream, entries: [], doc: { paths: {} } });
            else reject(new Error('connection refused'));
          },
        };
        const cancel = (): void => {
          if (fetch.done) return;
          fetch.done = true;
          reject(new Error('discovery was cancelled'));
        };
        if (options.signal?.aborted) cancel();
        options.signal?.addEventListener('abort', cancel, { once: true });
        this.fetches.push(fetch);
      });
    this.reloader = new Reloader({
      log: silentLog(),
      file: 'gateway.json',
      config: INITIAL,
      load: () => {
        const file = this.file;
        this.events.push({ kind: 'load', file, serving: this.reloader.config });
        if (file === 'broken') throw new Error('gateway.json:1:3: invalid JSON');
        return structuredClone(CONFIGS[file]!);
      },
      discover,
      publisher: this.publisher,
      replaceWorkers: (settings, slots) => this.replaceWorkers(slots),
      onChanged: () => {},
      onApplied: () => void this.applied++,
      publishRetryMs: 1,
      onOutcome: (result) => {
        if (this.stopped) this.problems.push('an outcome was recorded after stop()');
        this.events.push({ kind: 'outcome', result, serving: this.reloader.config });
      },
    });
  }

  liveFetches(): Fetch[] {
    return this.fetches.filter((f) => !f.done);
  }

  private async replaceWorkers(slots: readonly number[] | null): Promise<WorkerReplacement> {
    if (this.replacing) this.problems.push('two worker replacements at once');
    // Successors start with the state last handed to the workers: it must be the one the reload wants.
    if (this.publisher.current?.message.config !== this.reloader.config) this.problems.push('successors would start with a state that does not serve');
    this.replacing = true;
    await settleDown(1);
    this.replacing = false;
    const wanted = slots ?? [0, 1];
    const failAt = this.failReplaceAtSlot;
    this.failReplaceAtSlot = null;
    if (failAt !== null && wanted.includes(failAt)) {
      return { ok: false, error: `the new worker of slot ${failAt} exited with code 1 before it was ready`, replaced: wanted.filter((s) => s < failAt) };
    }
    return { ok: true, replaced: [...wanted] };
  }

  /**
   * Every upstream of the serving registry that is pending has a fetch of its doc still running (its
   * own, or the one a reload that left it unchanged follows): none waits forever.
   */
  checkNothingStranded(): void {
    const source = (u: UpstreamConfig): string => `${u.serviceLocation} ${u.specPath ?? ''}`;
    for (const record of this.reloader.upstreams.records) {
      if (record.state !== 'pending') continue;
      if (!this.fetches.some((f) => !f.done && source(f.upstream) === source(record.config) && !f.signal?.aborted)) {
        this.problems.push(`${record.config.serviceLocation} is pending with no discovery running`);
      }
    }
  }
}

class FakePublisher implements PublishTarget {
  current: Published | null = null;
  lastState: PublishState | null = null;
  busy = 0;
  lastOk = true;
  private version = 0;
  private chain: Promise<unknown> = Promise.resolve();

  constructor(private readonly world: World) {}

  publish(state: PublishState): Promise<PublishOutcome> {
    this.busy++;
    const outcome = this.chain.then(async (): Promise<PublishOutcome> => {
      const complete = state.upstreams.allSettled();
      await settleDown(1);
      this.busy--;
      this.lastOk = this.world.failCompiles === 0;
      if (this.world.failCompiles > 0) {
        this.world.failCompiles--;
        return { ok: false, error: 'routing table compilation failed: boom' };
      }
      const published: Published = {
        message: { type: 'publish', tableVersion: ++this.version, config: state.config, table: {} as never, spec: { swagger2: '{}', openapi3: '{}' }, upstreams: [] },
        complete,
        problems: [],
      };
      this.current = published;
      this.lastState = state;
      return { ok: true, published };
    });
    this.chain = outcome;
    return outcome;
  }
}

type Command =
  | { kind: 'sighup'; file: number | 'broken' }
  | { kind: 'answer'; pick: number; ok: boolean }
  | { kind: 'wait'; turns: number }
  | { kind: 'failCompile' }
  | { kind: 'failReplace'; slot: number };

const command: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('sighup' as const), file: fc.oneof(fc.integer({ min: 0, max: CONFIGS.length - 1 }), fc.constant('broken' as const)) }) },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('answer' as const), pick: fc.nat(), ok: fc.boolean() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('wait' as const), turns: fc.integer({ min: 0, max: 6 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('failCompile' as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('failReplace' as const), slot: fc.integer({ min: 0, max: 1 }) }) },
);

async function drive(world: World, commands: Command[]): Promise<void> {
  world.reloader.start();
  for (const c of commands) {
    switch (c.kind) {
      case 'sighup':
        world.file = c.file;
        world.events.push({ kind: 'sighup', file: c.file });
        world.reloader.sighup();
        break;
      case 'answer': {
        const live = world.liveFetches();
        if (live.length > 0) live[c.pick % live.length]!.answer(c.ok);
        break;
      }
      case 'wait':
        await settleDown(c.turns);
        break;
      case 'failCompile':
        // Bounded, so the retries (1 ms, doubling) stay quick.
        world.failCompiles = Math.min(world.failCompiles + 1, 3);
        break;
      case 'failReplace':
        world.failReplaceAtSlot = c.slot;
        break;
    }
    await settleDown(1);
    world.checkNothingStranded();
  }
}

/** The doc fetches all answer (each ok or not, as `oks` says), until nothing runs any more. */
async function answerEverything(world: World, oks: boolean[]): Promise<void> {
  for (let round = 0; round < 100; round++) {
    await settleDown();
    world.checkNothingStranded();
    const live = world.liveFetches();
    if (live.length === 0 && !world.reloader.reloading && world.publisher.busy === 0 && world.publisher.lastOk) return;
    // A failed publish is retried after a (short, here) timer.
    await new Promise((resolve) => setTimeout(resolve, 5));
    live.forEach((fetch, i) => fetch.answer(oks[(round + i) % oks.length] ?? true));
  }
  world.problems.push('still busy after 100 rounds of answers');
}

function lastIndex<T>(items: readonly T[], predicate: (item: T) => boolean): number {
  for (let i = items.length - 1; i >= 0; i--) if (predicate(items[i]!)) return i;
  return -1;
}

const sameUpstreams = (a: GatewayConfig, b: GatewayConfig): boolean =>
  JSON.stringify(a.upstreams) === JSON.stringify(b.upstreams) && a.name === b.name;

t.test('random SIGHUP sequences: every serving upstream settles, the serving state is published complete, the last SIGHUP gets an outcome', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(command, { maxLength: 30 }), fc.array(fc.boolean(), { minLength: 1, maxLength: 4 }), async (commands, oks) => {
      const world = new World();
      await drive(world, commands);
      await answerEverything(world, oks);
      const { reloader, publisher, events, problems } = world;

      if (problems.length > 0) throw new Error(problems.join('; '));
      if (reloader.reloading) throw new Error('a reload still runs');
      const pending = reloader.upstreams.records.filter((r) => r.state === 'pending');
      if (pending.length > 0) throw new Error(`pending for good: ${pending.map((r) => r.config.serviceLocation).join(', ')}`);
      if (publisher.lastState?.upstreams !== reloader.upstreams || publisher.current?.message.config !== reloader.config) {
        throw new Error('the state that serves is not the one last published');
      }
      if (!publisher.current.complete) throw new Error('the last table was compiled before every upstream settled: health would stay 503');

      const lastSighup = lastIndex(events, (e) => e.kind === 'sighup');
      const outcomes = events.filter((e): e is Extract<Event, { kind: 'outcome' }> => e.kind === 'outcome');
      // What serves is what the last outcome says: the new config when applied, else the one before it.
      for (let i = 0; i < events.length; i++) {
        const outcome = events[i]!;
        if (outcome.kind !== 'outcome') continue;
        const load = events[lastIndex(events.slice(0, i), (e) => e.kind === 'load')] as Extract<Event, { kind: 'load' }>;
        if (outcome.result.applied) {
          if (load.file === 'broken' || !sameUpstreams(outcome.serving, CONFIGS[load.file]!)) throw new Error('applied, but the new config does not serve');
        } else if (outcome.serving !== load.serving) {
          throw new Error(`not applied (${outcome.result.error}), but the config that served before does not serve`);
        }
      }
      const lastOutcome = outcomes.at(-1);
      if (lastOutcome && reloader.config !== lastOutcome.serving) throw new Error('the serving config changed after the last outcome');
      // The last SIGHUP reads the file once, and that read gets exactly one outcome (a reload already
      // past its discovery may still record its own in between).
      if (lastSighup >= 0) {
        const after = events.slice(lastSighup + 1);
        const loads = after.filter((e) => e.kind === 'load');
        const lastLoad = lastIndex(events, (e) => e.kind === 'load');
        const outcomes = events.slice(lastLoad + 1).filter((e) => e.kind === 'outcome');
        if (loads.length !== 1 || outcomes.length !== 1) throw new Error(`the last SIGHUP led to ${loads.length} loads, and its read to ${outcomes.length} outcomes`);
      }
      const appliedOutcomes = outcomes.filter((o) => o.result.applied).length;
      if (world.applied !== appliedOutcomes) throw new Error(`onApplied ${world.applied} times for ${appliedOutcomes} applied reloads`);
    }),
    {
      numRuns: 1000,
      examples: [
        // The sequence: a good SIGHUP, then a broken one, while the first discovery waits.
        [[{ kind: 'sighup', file: 0 }, { kind: 'sighup', file: 'broken' }, { kind: 'wait', turns: 3 }], [true]],
        // A reload that replaces workers, fails there, while the first discovery still runs.
        [[{ kind: 'sighup', file: 3 }, { kind: 'failReplace', slot: 0 }, { kind: 'answer', pick: 2, ok: false }, { kind: 'answer', pick: 2, ok: false }], [false]],
      ],
    },
  );
});

t.test('the issue sequence: good SIGHUP then broken SIGHUP while the first discovery waits on a slow doc', async (t) => {
  const world = new World();
  world.reloader.start();
  await settleDown();
  const [slowA, fastB] = world.liveFetches();
  fastB!.answer(true);
  await settleDown();
  world.file = 1;
  world.reloader.sighup();
  await settleDown();
  t.same(
    world.liveFetches().map((f) => f.upstream.serviceLocation),
    ['http://a:1', 'http://c:1'],
    'the reload fetches only the new upstream; the pending one is not fetched again',
  );
  world.file = 'broken';
  world.reloader.sighup();
  await settleDown();
  t.notOk(world.liveFetches()[1]!.signal?.aborted, 'a SIGHUP does not abort the reload in progress');
  world.liveFetches()[1]!.answer(true);
  await world.reloader.idle();
  t.same(
    world.events.filter((e) => e.kind === 'outcome').map((e) => (e as Extract<Event, { kind: 'outcome' }>).result.applied),
    [true, false],
    'the first reload applies, then the broken file is refused',
  );
  t.same(world.reloader.upstreams.records.map((r) => r.state), ['pending', 'ready', 'ready'], 'a is still pending, following its first discovery');
  t.notOk(slowA!.signal?.aborted, 'the first discovery of a was not aborted');
  world.checkNothingStranded();
  t.same(world.problems, []);
  slowA!.answer(true);
  await settleDown();
  t.same(world.reloader.upstreams.records.map((r) => r.state), ['ready', 'ready', 'ready']);
  t.ok(world.publisher.current?.complete, 'published complete once the slow doc arrived');
  t.equal(world.publisher.lastState?.upstreams, world.reloader.upstreams);
});

t.test('stop() during a reload: discoveries are aborted, no outcome is recorded', async (t) => {
  const world = new World();
  world.reloader.start();
  await settleDown();
  world.file = 1;
  world.reloader.sighup();
  await settleDown();
  t.ok(world.reloader.reloading);
  world.stopped = true;
  world.reloader.stop();
  await world.reloader.idle();
  t.same(world.liveFetches(), [], 'every fetch was cancelled');
  t.same(world.events.filter((e) => e.kind === 'outcome'), []);
  world.reloader.sighup();
  t.notOk(world.reloader.reloading, 'a SIGHUP after stop() does nothing');
  t.same(world.problems, []);
});

t.test('a worker that does not take over rolls the reload back: the previous config serves and is published again', async (t) => {
  const world = new World();
  world.reloader.start();
  await settleDown();
  for (const fetch of world.liveFetches()) fetch.answer(true);
  await settleDown();
  const before = world.reloader.config;
  const registry = world.reloader.upstreams;
  world.failReplaceAtSlot = 1;
  world.file = 4; // a new name: the workers are replaced
  world.reloader.sighup();
  await world.reloader.idle();
  const outcome = world.events[lastIndex(world.events, (e) => e.kind === 'outcome')] as Extract<Event, { kind: 'outcome' }>;
  t.match(outcome.result, { ok: false, applied: false, error: /workers could not be replaced: the new worker of slot 1 exited with code 1/ });
  t.equal(world.reloader.config, before);
  t.equal(world.reloader.upstreams, registry);
  t.equal(world.publisher.current?.message.config, before, 'the previous state was handed to the workers again');
  t.equal(world.applied, 0);
  t.same(world.problems, []);
});
