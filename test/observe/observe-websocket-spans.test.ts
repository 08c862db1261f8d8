// A sampled WebSocket upgrade is traced as any request: its server span and the client span whose id
// the upstream got as its parent are exported when the connection ends, and its access-log line
// carries the trace id.
import t from 'tap';
import { eventually, startGateway, testConfig } from '../helpers/gateway-process.js';
import { startOtlpReceiver } from '../helpers/otlp-receiver.js';
import { nextMessage, openClient, startWsUpstream, wsUpstreamConfig } from '../helpers/ws-upstream.js';

t.test('a sampled upgrade exports its server and client spans; the upstream parent is the client span', async (t) => {
  const receiver = await startOtlpReceiver(t);
  const upstream = await startWsUpstream(t);
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/echo'])], { tracing: { otlpEndpoint: receiver.url, sampleRatio: 1 } }),
    waitFor: (line) => line.msg === 'gateway operational',
    workers: 1,
  });
  const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
  const socket = await openClient(`ws://127.0.0.1:${gateway.port}/echo`, [], { traceparent: `00-${traceId}-00f067aa0ba902b7-01` });
  socket.send('hello');
  t.equal(String((await nextMessage(socket)).data), 'hello');
  const sent = String(upstream.handshakes[0]!.headers.traceparent);
  t.match(sent, new RegExp(`^00-${traceId}-[0-9a-f]{16}-01$`), 'the upstream continues the caller\'s trace');
  socket.close(1000);

  const spans = await eventually(async () => {
    const found = receiver.spans.filter((s) => s.traceId === traceId);
    return found.length >= 2 ? found : undefined;
  }, 15_000, 50, 'the spans of the upgrade');
  const server = spans.find((s) => s.kind === 2);
  const client = spans.find((s) => s.kind === 3);
  t.ok(server, 'a server span');
  t.equal(server?.parentSpanId, '00f067aa0ba902b7', "its parent is the caller's span");
  t.ok(client, 'a client span');
  t.equal(client?.spanId, sent.split('-')[2], 'the parent the upstream got is the exported client span');
  t.equal(client?.parentSpanId, server?.spanId);

  const line = await gateway.waitForLog((l) => l.log === 'access' && l.path === '/echo', 10_000, "the connection's access-log line");
  t.equal(line.traceId, traceId, 'the access-log line carries the trace id');
});
