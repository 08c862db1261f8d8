// MetricsRecorder.routeFinished (keyed by route id) records exactly what requestFinished with the
// "METHOD template" key records, and a route id reused by a new table lands in the new template's series.
import t from 'tap';
import { MetricsRecorder } from '../../src/metrics/recorder.js';

t.test('routeFinished records what requestFinished records', async (t) => {
  const byKey = new MetricsRecorder({ useWebAssembly: false });
  const byId = new MetricsRecorder({ useWebAssembly: false });
  const calls: Array<[number, string, string, string | null, number, number]> = [
    [0, 'GET', '/users/{id}', 'http://a:1', 200, 1200],
    [0, 'GET', '/users/{id}', 'http://b:1', 503, 300],
    [1, 'POST', '/users', 'http://a:1', 201, 5000.4],
    [0, 'GET', '/users/{id}', 'http://a:1', 200, 800],
    [1, 'POST', '/users', null, 503, 10],
  ];
  for (const [id, method, template, upstream, status, micros] of calls) {
    byKey.requestStarted();
    byId.requestStarted();
    byKey.requestFinished(`${method} ${template}`, upstream, status, micros);
    byId.routeFinished(id, method, template, upstream, status, micros);
  }
  t.same(byId.takeDelta(), byKey.takeDelta());
});

t.test('a route id reused by another table goes to its new template', async (t) => {
  const recorder = new MetricsRecorder({ useWebAssembly: false });
  recorder.routeFinished(3, 'GET', '/old/{id}', 'http://a:1', 200, 100);
  recorder.routeFinished(3, 'GET', '/new/{id}', 'http://a:1', 200, 100);
  recorder.routeFinished(3, 'PUT', '/new/{id}', 'http://a:1', 204, 100);
  // An equal template in a fresh string (a recompiled table) still counts as the same endpoint.
  recorder.routeFinished(3, 'PUT', ['/new', '{id}'].join('/'), 'http://a:1', 204, 100);
  const delta = recorder.takeDelta();
  t.same(Object.keys(delta.endpoints).sort(), ['GET /new/{id}', 'GET /old/{id}', 'PUT /new/{id}']);
  t.equal(delta.endpoints['GET /old/{id}']!.requests, 1);
  t.equal(delta.endpoints['GET /new/{id}']!.requests, 1);
  t.equal(delta.endpoints['PUT /new/{id}']!.requests, 2);
  t.equal(delta.upstreams['http://a:1']!.requests, 4);
  t.equal(delta.overall.requests, 4);
});
