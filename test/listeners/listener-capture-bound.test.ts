// A capture keeps no more body bytes than the listeners that sampled the request can use
// (RequestListener.maxCaptureBytes): sampled requests of a listener with a small bound do not hold
// bodies up to limits.maxBodyBytes.
import t from 'tap';
import type { Capture } from '../../src/exchange/capture.js';
import type { RequestListener } from '../../src/exchange/listener.js';
import { rawRequest } from '../helpers/raw-http.js';
import { entry, startUpstream } from '../helpers/upstream-server.js';
import { planeInFrontOf } from '../helpers/data-plane.js';

const upstream = await startUpstream();
t.teardown(() => upstream.close());
const plane = await planeInFrontOf(t, upstream.url, [entry('POST', '/items', upstream.url)], { config: { limits: { maxBodyBytes: 1024 * 1024 } } });

function spy(id: string, maxCaptureBytes: number | undefined, seen: Capture[]): RequestListener {
  return { id, maxCaptureBytes, sample: () => true, done: (_ctx, capture) => seen.push(capture!) };
}

/** Listeners hear of a request after its answer was sent: polls for up to 3 s. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 300 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
}

const post = (body: string) =>
  rawRequest(plane.port, `POST /items HTTP/1.1\r\nHost: gw\r\nContent-Length: ${body.length}\r\n\r\n${body}`, { responses: 1 });

t.test('the capture stops at the largest bound of the listeners that sampled the request', async (t) => {
  const seen: Capture[] = [];
  plane.setListeners([spy('small', 200, seen)]);
  await post('x'.repeat(150));
  await post('x'.repeat(300));
  await until(() => seen.length >= 2);
  t.equal(seen.length, 2);
  t.equal(seen[0]!.maxBytes, 200);
  t.equal(seen[0]!.requestBytes, 150, 'a body within the bound is kept whole');
  t.notOk(seen[0]!.requestTruncated);
  t.ok(seen[0]!.responseTruncated, "the echo's answer (over 200 bytes) is not kept");
  t.equal(seen[0]!.responseBytes, 0);
  t.ok(seen[1]!.requestTruncated, 'a body over the bound is marked truncated');
  t.equal(seen[1]!.requestBytes, 0, '...and nothing of it is held');

  const both: Capture[] = [];
  plane.setListeners([spy('small', 200, both), spy('unbounded', undefined, [])]);
  await post('x'.repeat(300));
  await until(() => both.length >= 1);
  t.equal(both[0]!.maxBytes, 1024 * 1024, 'a listener without a bound gets what the gateway accepts');
  t.equal(both[0]!.requestBytes, 300);
  t.notOk(both[0]!.responseTruncated);
});
