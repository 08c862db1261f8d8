import t from 'tap';
import { Breakers, DEFAULT_BREAKER_SETTINGS } from '../../src/proxy/upstream-breakers.js';

function setup(settings = DEFAULT_BREAKER_SETTINGS) {
  const clock = { now: 1_000_000 };
  const breakers = new Breakers(settings, () => clock.now);
  return { clock, breakers };
}

function fail(breakers: Breakers, upstream: string, routeId: number, times: number): void {
  for (let i = 0; i < times; i++) breakers.onFailure(upstream, routeId);
}

const H = 'http://10.0.0.1:8080';
const OTHER = 'http://10.0.0.2:8080';

function stateOf(breakers: Breakers, upstream: string, routeId: number | null) {
  return breakers.snapshot().find((s) => s.upstream === upstream && s.routeId === routeId);
}

t.test('endpoint breaker trips at exactly 25 consecutive failures and blocks only that route on that host', async (t) => {
  const { breakers } = setup();
  t.ok(breakers.canSend(H, 1), 'unknown host is closed');
  fail(breakers, H, 1, 24);
  t.ok(breakers.canSend(H, 1), '24 failures: still closed');
  t.same(stateOf(breakers, H, 1), { upstream: H, routeId: 1, state: 'closed', failures: 24 });
  breakers.onFailure(H, 1);
  t.notOk(breakers.canSend(H, 1), '25th failure opens it');
  t.ok(breakers.canSend(H, 2), 'other route on the same host');
  t.ok(breakers.canSend(OTHER, 1), 'same route on another host');
  t.same(stateOf(breakers, H, 1), { upstream: H, routeId: 1, state: 'open', failures: 25 });
  t.same(stateOf(breakers, H, null), { upstream: H, routeId: null, state: 'closed', failures: 25 });
});

t.test('host breaker trips at exactly 50 and blocks every route of that host', async (t) => {
  const { breakers } = setup();
  // Spread over routes so no endpoint breaker trips first.
  for (let i = 0; i < 49; i++) breakers.onFailure(H, i % 10);
  t.ok(breakers.canSend(H, 99));
  breakers.onFailure(H, 9);
  t.notOk(breakers.canSend(H, 99), 'route never seen before is blocked too');
  t.notOk(breakers.canSend(H, 0));
  t.ok(breakers.canSend(OTHER, 0));
  t.equal(stateOf(breakers, H, null)?.state, 'open');
  t.equal(stateOf(breakers, H, 9)?.state, 'closed', 'endpoint breakers of that host untouched');
});

t.test('failures count consecutively: a success resets the count', async (t) => {
  const { breakers } = setup();
  for (let round = 0; round < 10; round++) {
    fail(breakers, H, 1, 24);
    breakers.onSuccess(H, 1);
  }
  t.ok(breakers.canSend(H, 1), '240 failures, never 25 in a row');
  t.same(stateOf(breakers, H, 1), { upstream: H, routeId: 1, state: 'closed', failures: 0 });
  fail(breakers, H, 1, 20);
  breakers.onSuccess(H, 2);
  t.equal(stateOf(breakers, H, null)?.failures, 0, 'a success on any route resets the host count');
  t.equal(stateOf(breakers, H, 1)?.failures, 20, 'but not another route\'s count');
});

t.test('open for resetMs, then one trial; success closes', async (t) => {
  const { clock, breakers } = setup();
  fail(breakers, H, 1, 25);
  clock.now += 9_999;
  t.notOk(breakers.canSend(H, 1), 'still open just before resetMs');
  t.equal(stateOf(breakers, H, 1)?.state, 'open');
  clock.now += 1;
  t.equal(stateOf(breakers, H, 1)?.state, 'half-open', 'ready for a trial');
  t.ok(breakers.canSend(H, 1), 'the trial');
  t.notOk(breakers.canSend(H, 1), 'only one trial');
  t.notOk(breakers.canSend(H, 1));
  t.equal(stateOf(breakers, H, 1)?.state, 'half-open');
  breakers.onSuccess(H, 1);
  t.ok(breakers.canSend(H, 1), 'closed again');
  t.ok(breakers.canSend(H, 1));
  t.same(stateOf(breakers, H, 1), { upstream: H, routeId: 1, state: 'closed', failures: 0 });
});

t.test('a failed trial re-opens for another resetMs', async (t) => {
  const { clock, breakers } = setup();
  fail(breakers, H, 1, 25);
  clock.now += 10_000;
  t.ok(breakers.canSend(H, 1));
  breakers.onFailure(H, 1);
  t.equal(stateOf(breakers, H, 1)?.state, 'open');
  clock.now += 9_999;
  t.notOk(breakers.canSend(H, 1));
  clock.now += 1;
  t.ok(breakers.canSend(H, 1), 'next trial after another resetMs');
  breakers.onSuccess(H, 1);
  t.ok(breakers.canSend(H, 1));
});

t.test('host half-open: one trial across all routes', async (t) => {
  const { clock, breakers } = setup();
  for (let i = 0; i < 50; i++) breakers.onFailure(H, i % 5);
  clock.now += 10_000;
  t.ok(breakers.canSend(H, 7), 'trial on any route');
  t.notOk(breakers.canSend(H, 8), 'no second request while the trial is out');
  breakers.onSuccess(H, 7);
  t.ok(breakers.canSend(H, 8));
  t.ok(breakers.canSend(H, 0));
});

t.test('host and endpoint both open: no trial is taken until both allow one', async (t) => {
  const { clock, breakers } = setup({ hostFailures: 3, endpointFailures: 2, resetMs: 100 });
  fail(breakers, H, 1, 2); // endpoint 1 open at t0
  clock.now += 50;
  breakers.onFailure(H, 2); // host open at t0+50 (3 in a row)
  clock.now += 60; // endpoint 1 ready, host not yet
  t.notOk(breakers.canSend(H, 1), 'host still open');
  clock.now += 40; // both ready
  t.ok(breakers.canSend(H, 1), 'one request is the trial of both');
  t.notOk(breakers.canSend(H, 2), 'host trial is out');
  breakers.onSuccess(H, 1);
  t.ok(breakers.canSend(H, 1));
  t.ok(breakers.canSend(H, 2));
});

t.test('late outcomes while open change nothing; a lost trial is given up after resetMs', async (t) => {
  const { clock, breakers } = setup({ hostFailures: 50, endpointFailures: 2, resetMs: 100 });
  fail(breakers, H, 1, 2);
  breakers.onSuccess(H, 1); // a request sent before it opened
  t.notOk(breakers.canSend(H, 1), 'a late success does not close an open breaker');
  clock.now += 100;
  t.ok(breakers.canSend(H, 1), 'trial');
  clock.now += 99;
  t.notOk(breakers.canSend(H, 1), 'trial outstanding');
  clock.now += 1;
  t.ok(breakers.canSend(H, 1), 'trial never reported: another one');
});

t.test('snapshot, forgetRoutes, settings validation', async (t) => {
  const { breakers } = setup();
  t.same(breakers.snapshot(), []);
  breakers.onSuccess(H, 1);
  t.same(breakers.snapshot(), [], 'successes alone track nothing');
  breakers.onFailure(H, 3);
  t.same(breakers.snapshot(), [
    { upstream: H, routeId: null, state: 'closed', failures: 1 },
    { upstream: H, routeId: 3, state: 'closed', failures: 1 },
  ]);
  t.same(JSON.parse(JSON.stringify(breakers.snapshot())), breakers.snapshot(), 'JSON-safe');
  breakers.forgetRoutes(new Set([H]));
  t.same(breakers.snapshot(), [{ upstream: H, routeId: null, state: 'closed', failures: 1 }]);
  t.throws(() => new Breakers({ hostFailures: 0, endpointFailures: 1, resetMs: 1 }), RangeError);
  t.throws(() => new Breakers({ hostFailures: 1, endpointFailures: 1, resetMs: -1 }), RangeError);
});

t.test('forgetRoutes reports what it reset and drops the hosts no longer named', async (t) => {
  const clock = { now: 1_000_000 };
  let changes = 0;
  const breakers = new Breakers({ hostFailures: 3, endpointFailures: 2, resetMs: 10_000 }, () => clock.now, () => changes++);
  fail(breakers, H, 1, 3);
  fail(breakers, OTHER, 2, 2);
  t.notOk(breakers.canSend(H, 1), 'H open');
  t.notOk(breakers.canSend(OTHER, 2), 'OTHER + route 2 open');
  changes = 0;
  breakers.forgetRoutes(new Set([OTHER]));
  t.equal(changes, 1, 'one change for the report: endpoint circuits reset, a host dropped');
  t.same(breakers.snapshot(), [{ upstream: OTHER, routeId: null, state: 'closed', failures: 2 }], 'H gone; OTHER keeps its host circuit only');
  t.same(breakers.report(() => 'GET /x'), [{ upstream: OTHER, endpoint: null, state: 'closed', failures: 2, since: 0 }]);
  t.ok(breakers.canSend(OTHER, 2), 'the endpoint breaker starts over');
  breakers.onFailure(H, 1);
  breakers.trip(H, null);
  t.same(breakers.snapshot().map((s) => s.upstream), [OTHER], 'a late failure or trip for a dropped host tracks nothing');
  t.equal(changes, 1, 'and reports nothing');
  changes = 0;
  breakers.forgetRoutes(new Set([OTHER]));
  t.equal(changes, 0, 'nothing to forget: no report');
  breakers.forgetRoutes(new Set([H, OTHER]));
  breakers.onFailure(H, 1);
  t.same(breakers.snapshot().map((s) => [s.upstream, s.routeId, s.state, s.failures]), [
    [OTHER, null, 'closed', 2],
    [H, null, 'closed', 1],
    [H, 1, 'closed', 1],
  ], 'a host named again is tracked afresh');
});
