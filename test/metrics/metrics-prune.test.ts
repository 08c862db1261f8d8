// docs/observability.md: a removed upstream's or endpoint's series disappear when the routing table
// that removes it is published (primary) and swapped in (workers); later deltas for it do not bring it
// back; what is still routed keeps its counts.
import t from 'tap';
import { MetricsRecorder } from '../../src/metrics/recorder.js';
import { MetricsAggregator } from '../../src/metrics/aggregate.js';
import { routedSeries } from '../../src/metrics/routed-series.js';

const A = 'http://10.0.0.1:8080';
const B = 'http://10.0.0.2:8080';

const tableAB = routedSeries([
  ['GET', '/a/{id}', [A]],
  ['POST', '/b', [B]],
]);
const tableA = routedSeries([['GET', '/a/{id}', [A]]]);

t.test('routedSeries: every route and target, and HEAD for a GET route', async (t) => {
  t.same([...tableAB.upstreams].sort(), [A, B]);
  t.same([...tableAB.endpoints].sort(), ['GET /a/{id}', 'HEAD /a/{id}', 'POST /b']);
});

t.test('aggregator: a new table drops the series it no longer has; late deltas for them count overall only', async (t) => {
  const worker = new MetricsRecorder({ useWebAssembly: false });
  const metrics = new MetricsAggregator(() => 0);
  metrics.retainRouted(tableAB);
  worker.requestFinished('GET /a/{id}', A, 200, 1000, 500);
  worker.requestFinished('HEAD /a/{id}', A, 200, 1000, 500);
  worker.requestFinished('POST /b', B, 502, 2000, 1500);
  metrics.addDelta(1, worker.takeDelta());
  let report = metrics.report();
  t.same(Object.keys(report.upstreams).sort(), [A, B]);
  t.same(Object.keys(report.endpoints).sort(), ['GET /a/{id}', 'HEAD /a/{id}', 'POST /b']);
  const before = metrics.prometheus();
  t.match(before, `upstream="${B}"`);
  t.match(before, 'route="/b"');

  worker.requestFinished('POST /b', B, 502, 2000, 1500);
  const late = worker.takeDelta();
  metrics.retainRouted(tableA);
  report = metrics.report();
  t.same(Object.keys(report.upstreams), [A], 'B gone');
  t.same(Object.keys(report.endpoints).sort(), ['GET /a/{id}', 'HEAD /a/{id}'], 'POST /b gone');
  const after = metrics.prometheus();
  t.notMatch(after, `upstream="${B}"`, 'no series of B in the exposition');
  t.notMatch(after, 'route="/b"', 'nor of POST /b');

  metrics.addDelta(1, late);
  report = metrics.report();
  t.same(Object.keys(report.upstreams), [A], 'a late delta does not bring B back');
  t.same(Object.keys(report.endpoints).sort(), ['GET /a/{id}', 'HEAD /a/{id}']);
  t.equal(report.requests.total, 4, 'the overall series counts it');
  t.equal(report.upstreams[A]!.requests, 2, 'A kept its counts');
  t.equal(report.endpoints['GET /a/{id}']!.requests, 1);

  metrics.retainRouted(tableAB);
  worker.requestFinished('POST /b', B, 200, 1000, 500);
  metrics.addDelta(1, worker.takeDelta());
  report = metrics.report();
  t.equal(report.upstreams[B]!.requests, 1, 'B added back starts from 0');
  t.equal(report.endpoints['POST /b']!.requests, 1);
  t.equal(report.upstreams[A]!.requests, 2, 'A still as it was');
});

t.test('aggregator: before the first table every series is kept', async (t) => {
  const worker = new MetricsRecorder({ useWebAssembly: false });
  const metrics = new MetricsAggregator(() => 0);
  worker.requestFinished('GET /x', A, 200, 1000);
  metrics.addDelta(1, worker.takeDelta());
  t.same(Object.keys(metrics.report().endpoints), ['GET /x']);
});

t.test('recorder: a new table drops the series it no longer has, unshipped counts included; late requests record overall only', async (t) => {
  const worker = new MetricsRecorder({ useWebAssembly: false });
  worker.retainRouted(tableAB);
  worker.routeFinished(0, 'GET', '/a/{id}', A, 200, 1000, 500);
  worker.routeFinished(1, 'POST', '/b', B, 200, 1000, 500);
  worker.retainRouted(tableA);
  let delta = worker.takeDelta();
  t.equal(delta.overall.requests, 2);
  t.same(Object.keys(delta.upstreams), [A]);
  t.same(Object.keys(delta.endpoints), ['GET /a/{id}']);

  // A request that finishes on the table before (route id 1 of it), by id and by key.
  worker.routeFinished(1, 'POST', '/b', B, 200, 1000, 500);
  worker.requestFinished('POST /b', B, 200, 1000, 500);
  worker.routeFinished(0, 'GET', '/a/{id}', A, 200, 1000, 500);
  delta = worker.takeDelta();
  t.equal(delta.overall.requests, 3, 'overall counts every request');
  t.same(Object.keys(delta.upstreams), [A], 'nothing under B');
  t.same(Object.keys(delta.endpoints), ['GET /a/{id}'], 'nothing under POST /b');
  t.equal(delta.upstreams[A]!.requests, 1);
  delta = worker.takeDelta();
  t.same([delta.overall.requests, delta.upstreams, delta.endpoints], [0, {}, {}], 'what was not shipped is not shipped later');

  worker.retainRouted(tableAB);
  worker.routeFinished(1, 'POST', '/b', B, 200, 1000, 500);
  delta = worker.takeDelta();
  t.equal(delta.upstreams[B]?.requests, 1, 'B routed again: recorded again, from 0');
  t.equal(delta.endpoints['POST /b']?.requests, 1);
});
