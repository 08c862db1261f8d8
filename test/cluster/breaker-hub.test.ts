// Breakers across workers (docs/reference/forward.md#circuit-breakers): the primary sums every worker's consecutive failures and
// opens a breaker on all of them at the threshold; the /metrics summary merges their states.
import t from 'tap';
import { BreakerHub, type BreakerTrip } from '../../src/cluster/breaker-hub.js';
import { Breakers, type CircuitReport } from '../../src/proxy/upstream-breakers.js';

const H = 'http://10.0.0.1:8080';
const settings = { hostFailures: 10, endpointFailures: 4, resetMs: 1000 };

function circuit(failures: number, endpoint: string | null = null, state: CircuitReport['state'] = 'closed', since = 0): CircuitReport {
  return { upstream: H, endpoint, state, failures, since };
}

t.test('the sum over workers trips the breaker once, and re-arms when the count drops', async (t) => {
  const trips: BreakerTrip[] = [];
  const hub = new BreakerHub(() => settings, (trip) => trips.push(trip));
  hub.report(1, [circuit(5)]);
  hub.report(2, [circuit(4)]);
  t.same(trips, [], '9 of 10');
  hub.report(2, [circuit(5)]);
  t.same(trips, [{ upstream: H, endpoint: null }], '10 in all: tripped');
  hub.report(1, [circuit(6, null, 'open', 1)]);
  t.equal(trips.length, 1, 'not again while it stays at or over the threshold');
  hub.report(1, [circuit(0)]);
  hub.report(2, [circuit(0)]);
  hub.report(1, [circuit(10)]);
  t.equal(trips.length, 2, 're-armed after the failures reset');
  hub.workerGone(1);
  hub.report(2, [circuit(3, 'GET /a'), circuit(3)]);
  hub.report(3, [circuit(1, 'GET /a'), circuit(1)]);
  t.same(trips[2], { upstream: H, endpoint: 'GET /a' }, 'endpoint breakers use their own threshold');
});

t.test('summary: worst state, summed failures, open past resetMs shows half-open, closed endpoints left out', async (t) => {
  let now = 10_000;
  const hub = new BreakerHub(() => settings, () => {}, () => now);
  hub.report(1, [circuit(2), circuit(1, 'GET /a'), circuit(5, 'GET /b', 'open', 9_500)]);
  hub.report(2, [circuit(3, null, 'open', 9_900), circuit(0, 'GET /a')]);
  t.same(hub.summary(), { [H]: { state: 'open', failures: 5, endpoints: { 'GET /b': { state: 'open', failures: 5 } } } });
  now = 11_000;
  t.same(hub.summary()[H]!.endpoints['GET /b'], { state: 'half-open', failures: 5 }, 'open for resetMs: its next request is the trial');
});

t.test('Breakers.trip opens a closed breaker now and tells onChange; report names endpoints', async (t) => {
  const clock = { now: 5_000 };
  let changes = 0;
  const breakers = new Breakers(settings, () => clock.now, () => changes++);
  breakers.onSuccess(H, 1);
  t.equal(changes, 0, 'a success of a clean host changes nothing');
  breakers.trip(H, null);
  t.equal(changes, 1);
  t.notOk(breakers.canSend(H, 1), 'open: nothing sent');
  breakers.trip(H, null);
  t.equal(changes, 1, 'already open: no change');
  breakers.trip(H, 7);
  t.same(breakers.report((id) => (id === 7 ? 'GET /seven' : null)), [
    { upstream: H, endpoint: null, state: 'open', failures: 0, since: 5_000 },
    { upstream: H, endpoint: 'GET /seven', state: 'open', failures: 0, since: 5_000 },
  ]);
  clock.now += settings.resetMs;
  t.ok(breakers.canSend(H, 7), 'after resetMs: the trial');
  breakers.onSuccess(H, 7);
  t.equal(breakers.report(() => null)[0]!.state, 'closed', 'the trial closed it');
  t.ok(changes >= 3, 'the trial outcome was reported');
});
