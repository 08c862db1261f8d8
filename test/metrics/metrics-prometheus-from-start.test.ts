// Figures the JSON /metrics has are in the Prometheus exposition too, from the start: span export's
// exported and dropped spans (0 before the first span, so an alert on drops is defined), the routing
// table version (before any reload) and worker restarts.
import { createServer, type AddressInfo } from 'node:net';
import t from 'tap';
import { eventually, httpRequest, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';
import { parsePrometheus, sampleValue } from '../helpers/prometheus.js';

const upstream = await startUpstream(t, {
  name: 'a',
  handle: (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end('{}');
  },
});
// A port that was free a moment ago: the collector is down, every span is dropped.
const probe = createServer();
await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
const deadPort = (probe.address() as AddressInfo).port;
await new Promise<void>((resolve) => probe.close(() => resolve()));

const gateway = await startGateway(t, {
  config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints: [{ method: 'GET', path: '/items/{id}' }] }], {
    accessLog: { enabled: false },
    tracing: { otlpEndpoint: `http://127.0.0.1:${deadPort}/v1/traces`, sampleRatio: 1 },
  }),
  waitFor: (line) => line.msg === 'gateway operational',
  startTimeoutMs: 60_000,
});

async function scrape(): Promise<{ prom: ReturnType<typeof parsePrometheus>; json: Record<string, unknown> }> {
  const prom = parsePrometheus((await httpRequest(gateway.port, '/metrics?format=prometheus')).body);
  const json = JSON.parse((await httpRequest(gateway.port, '/metrics')).body) as Record<string, unknown>;
  return { prom, json };
}

const value = (prom: ReturnType<typeof parsePrometheus>, name: string): number | undefined => sampleValue(prom, name, name, {});

t.test('before any request and any reload: span counters at 0, the table version, no restarts', async (t) => {
  const { prom, json } = await eventually(
    async () => {
      const both = await scrape();
      return value(both.prom, 'gateway_tracing_spans_dropped_total') !== undefined ? both : undefined;
    },
    5000,
    100,
    'span counters in the exposition',
  );
  t.equal(value(prom, 'gateway_tracing_spans_exported_total'), 0);
  t.equal(value(prom, 'gateway_tracing_spans_dropped_total'), 0);
  t.equal(prom.get('gateway_tracing_spans_dropped_total')?.type, 'counter');
  t.same(json.tracing, { spansDropped: 0, spansExported: 0 }, 'JSON says the same');
  t.type(json.tableVersion, 'number');
  t.equal(value(prom, 'gateway_routing_table_version'), json.tableVersion, 'the table in service, before any SIGHUP');
  t.notOk(prom.has('gateway_config_last_reload_successful'), 'no reload happened');
  t.equal(value(prom, 'gateway_worker_restarts_total'), 0);
  t.equal(json.workerRestarts, 0);
});

t.test('dropped spans show in the exposition as in JSON', async (t) => {
  for (let i = 0; i < 10; i++) t.equal((await httpRequest(gateway.port, `/items/${i}`)).status, 200);
  const dropped = await eventually(
    async () => {
      const { prom, json } = await scrape();
      const exposed = value(prom, 'gateway_tracing_spans_dropped_total') ?? 0;
      const reported = (json.tracing as { spansDropped: number }).spansDropped;
      return exposed >= 20 && exposed === reported ? exposed : undefined;
    },
    20_000,
    250,
    'the drops counted',
  );
  t.ok(dropped >= 20, `${dropped} spans dropped (server and client span of each request)`);
});
