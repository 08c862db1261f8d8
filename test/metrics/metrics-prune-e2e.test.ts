// docs/observability.md (Label values are bounded), through the running gateway with 2 workers: a
// SIGHUP reload that swaps one upstream and its endpoint for another drops the series of the removed
// ones from /metrics, so that reloads of a config of constant size do not grow the exposition; the
// series still routed keep counting as before.
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig, type TestUpstream } from '../helpers/gateway-process.js';
import { reloadWith } from '../helpers/reload.js';

const RELOADS = 4;

t.test('reloads that swap an upstream and its endpoint keep /metrics to the series of the table in service', async (t) => {
  const live = await startUpstream(t, { name: 'live' });
  const swapped: TestUpstream[] = [];
  for (let k = 0; k <= RELOADS; k++) swapped.push(await startUpstream(t, { name: `swapped-${k}` }));
  const config = (k: number) =>
    testConfig(
      [
        { serviceType: 'static', serviceLocation: live.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] },
        { serviceType: 'static', serviceLocation: swapped[k]!.location, endpoints: [{ method: 'GET', path: `/s${k}/{id}` }] },
      ],
      { accessLog: { enabled: false } },
    );
  const gateway = await startGateway(t, { config: config(0), waitFor: (line) => line.msg === 'gateway operational' });

  const prometheus = async () => (await httpRequest(gateway.port, '/metrics?format=prometheus')).body;
  /** The samples labelled with an upstream or a route. */
  const labelled = (text: string) => text.split('\n').filter((line) => !line.startsWith('#') && /(upstream|route)="/.test(line));
  const liveCount = (text: string) => {
    const prefix = `gateway_upstream_requests_total{upstream="${live.location}",status="200"} `;
    const line = text.split('\n').find((l) => l.startsWith(prefix));
    return line === undefined ? 0 : Number(line.slice(prefix.length));
  };

  let served = 0;
  let lastLive = 0;
  let shape: number | null = null;
  for (let k = 0; k <= RELOADS; k++) {
    if (k > 0) {
      const status = await reloadWith(gateway, config(k));
      t.ok(status.ok, `reload ${k}: ${JSON.stringify(status)}`);
    }
    t.equal((await httpRequest(gateway.port, `/s${k}/1`)).status, 200, `/s${k}/1 served by swapped-${k}`);
    t.equal((await httpRequest(gateway.port, '/items/1')).status, 200);
    served++;
    // Once both requests are in /metrics (workers ship their deltas within a second).
    const text = await eventually(async () => {
      const body = await prometheus();
      return liveCount(body) === served && body.includes(`route="/s${k}/{id}"`) && body.includes(`upstream="${swapped[k]!.location}"`) ? body : undefined;
    }, 5000, 50, `/metrics with the requests after reload ${k}`);
    const lines = labelled(text);
    if (k > 0) {
      t.same(lines.filter((line) => line.includes(`upstream="${swapped[k - 1]!.location}"`)), [], `reload ${k}: no series of the removed upstream`);
      t.same(lines.filter((line) => line.includes(`route="/s${k - 1}/{id}"`)), [], `reload ${k}: no series of the removed endpoint`);
    }
    const count = liveCount(text);
    t.ok(count >= lastLive, `the live upstream's counter does not go back (${lastLive} -> ${count})`);
    lastLive = count;
    if (shape === null) shape = lines.length;
    else t.equal(lines.length, shape, `reload ${k}: as many upstream and route series as before the first reload (${shape})`);
  }
  t.equal(lastLive, RELOADS + 1, 'every request to the live upstream counted');
});

t.test('re-discovery of a doc whose path changes keeps /metrics to the endpoint in service', async (t) => {
  let fetched = 0;
  let frozen = false;
  const doc = (path: string) => ({
    swagger: '2.0',
    info: { title: 'moving', version: '1' },
    paths: { [path]: { get: { parameters: [{ name: 'id', in: 'path', required: true, type: 'string' }], responses: { 200: { description: 'ok' } } } } },
  });
  // Each fetch of its doc names a new endpoint, /gen<n>/{id}: the table always holds one.
  const moving = await startUpstream(t, {
    name: 'moving',
    handle: (req, res) => {
      if (req.url === '/doc') {
        if (!frozen) fetched++;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify(doc(`/gen${fetched}/{id}`)));
        return;
      }
      res.end('ok');
    },
  });
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'swagger2', serviceLocation: moving.location, specPath: '/doc' }], {
      accessLog: { enabled: false },
      discovery: { fetchTimeoutMs: 5000, retries: 0, backoffMs: 100, refreshIntervalMs: 100 },
    }),
    waitFor: (line) => line.msg === 'gateway operational',
  });
  const routesIn = (text: string) => new Set(text.split('\n').flatMap((line) => /route="(\/gen\d+\/\{id\})"/.exec(line)?.[1] ?? []));

  // Requests to the endpoint of the doc fetched last, until 8 different ones were served.
  const servedRoutes = new Set<number>();
  const deadline = Date.now() + 20_000;
  while (servedRoutes.size < 8 && Date.now() < deadline) {
    const n = fetched;
    if ((await httpRequest(gateway.port, `/gen${n}/1`)).status === 200) servedRoutes.add(n);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  t.ok(servedRoutes.size >= 8, `requests served by ${servedRoutes.size} successive endpoints`);
  // The doc stops moving: once its last endpoint serves, /metrics shows that one, not every one served.
  frozen = true;
  const last = `/gen${fetched}/{id}`;
  await eventually(async () => ((await httpRequest(gateway.port, `/gen${fetched}/1`)).status === 200 ? true : undefined), 5000, 50, `${last} served`);
  const routes = await eventually(async () => {
    const found = routesIn((await httpRequest(gateway.port, '/metrics?format=prometheus')).body);
    return found.has(last) ? found : undefined;
  }, 5000, 50, `${last} in /metrics`);
  t.same([...routes], [last], 'route series in /metrics: the endpoint in service only');
  const endpoints = Object.keys((JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as { endpoints: Record<string, unknown> }).endpoints);
  t.same(endpoints.sort(), [`GET ${last}`], 'JSON endpoints: the same');
});
