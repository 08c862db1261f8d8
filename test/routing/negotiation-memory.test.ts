// docs/reference/routing.md#content-negotiation-415-406: state keyed by client-chosen values is bounded. 10,000 requests with distinct
// 7 KB Content-Type and Accept values, spread over 100 endpoints (so no per-endpoint limit is ever
// reached), must not grow a worker by more than 64 MB (kept whole, their values alone would be 140 MB).
import { readFileSync } from 'node:fs';
import t from 'tap';
import { Agent, request } from 'undici';
import { askWorker, startGateway, startUpstream, testConfig } from '../helpers/gateway-process.js';

const REQUESTS = 10_000;
const WARM_UP = 2_000;
const CONCURRENCY = 16;
const VALUE_CHARS = 7 * 1024;
const ROUTES = 100;
const MAX_GROWTH_BYTES = 64 * 1024 * 1024;

function rssOf(pid: string): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+) kB/.exec(status);
  if (kb === null) throw new Error(`no VmRSS for ${pid}`);
  return Number(kb[1]) * 1024;
}

/** A distinct value of VALUE_CHARS characters for request `i`. */
function filler(i: number, prefix: string): string {
  const tag = `${prefix}${i.toString(36)}`;
  return tag + 'x'.repeat(VALUE_CHARS - tag.length);
}

t.test('distinct 7 KB Content-Type/Accept pairs do not grow a worker', async (t) => {
  const upstream = await startUpstream(t, { name: 'items' });
  const endpoints = Array.from({ length: ROUTES }, (_, n) => ({
    method: 'POST',
    path: `/r${n}/items`,
    consumes: ['application/json'],
    produces: ['application/json'],
  }));
  const gateway = await startGateway(t, {
    config: testConfig([{ serviceType: 'static', serviceLocation: upstream.location, endpoints }], { accessLog: { enabled: false } }),
    workers: 1,
    waitFor: (line) => line.msg === 'gateway operational',
  });
  const { workerPid } = await askWorker(gateway.port, '/healthcheck');
  const agent = new Agent({ connections: CONCURRENCY, pipelining: 1 });
  t.teardown(() => agent.close());
  const statuses = new Map<number, number>();

  async function send(from: number, to: number): Promise<void> {
    let next = from;
    const lane = async (): Promise<void> => {
      while (next < to) {
        const i = next++;
        const res = await request(`http://127.0.0.1:${gateway.port}/r${i % ROUTES}/items`, {
          method: 'POST',
          dispatcher: agent,
          headers: { 'content-type': `application/json; ${filler(i, 'p=')}`, accept: `application/json;q=0.5, text/${filler(i, 'x-')}` },
          body: '{}',
        });
        await res.body.dump();
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, lane));
  }

  await send(0, WARM_UP);
  const before = rssOf(workerPid);
  await send(WARM_UP, WARM_UP + REQUESTS);
  const after = rssOf(workerPid);
  t.same([...statuses.keys()], [200], 'every request was negotiated and routed');
  const growth = after - before;
  t.comment(`worker RSS ${(before / 2 ** 20).toFixed(1)} MB -> ${(after / 2 ** 20).toFixed(1)} MB`);
  t.ok(growth < MAX_GROWTH_BYTES, `grew ${(growth / 2 ** 20).toFixed(1)} MB over ${REQUESTS} distinct pairs (bound 64 MB)`);
});
