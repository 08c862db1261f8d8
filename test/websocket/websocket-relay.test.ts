// WebSocket proxying through the running cluster: a differential property test (random sequences of
// text and binary messages, up to 1 MiB, fragmented or not, echoed by the upstream must come back
// through the gateway exactly as they come back directly, over several connections at once: the
// worker's upstream legs share one read buffer), and backpressure both ways: a client that stops
// reading while the upstream sends as fast as it may keeps the gateway worker's memory bounded and
// loses nothing once it reads again; an upstream that stops reading gets every message intact once it
// reads again (the gateway's writes to it stay pending meanwhile).
import fc from 'fast-check';
import t from 'tap';
import { WebSocket } from 'ws';
import { startGateway, testConfig } from '../helpers/gateway-process.js';
import { openClient, rssBytes, startWsUpstream, wsUpstreamConfig } from '../helpers/ws-upstream.js';

interface Sent {
  binary: boolean;
  size: number;
  fragments: number;
  seed: number;
}

/**
 * Deterministic content: bytes for binary, UTF-8 text with 1- to 4-byte characters for text. The text
 * cycles through the alphabet with a step prime to its length, and is built a cycle at a time: a
 * character at a time, the megabyte messages took most of this file's CPU.
 */
function payload(message: Sent): Buffer {
  if (message.binary) {
    const bytes = Buffer.allocUnsafe(message.size);
    let x = message.seed | 1;
    for (let i = 0; i < bytes.length; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      bytes[i] = x & 0xff;
    }
    return bytes;
  }
  const alphabet = ['a', 'Z', ' ', 'é', '€', '😀', '\n'];
  const charAt = (i: number): string => alphabet[(message.seed + i * 3) % alphabet.length]!;
  const cycle = alphabet.map((_, i) => charAt(i)).join('');
  const cycles = Math.floor(message.size / Buffer.byteLength(cycle));
  let text = cycle.repeat(cycles);
  let bytes = cycles * Buffer.byteLength(cycle);
  for (let i = cycles * alphabet.length; bytes < message.size; i++) {
    text += charAt(i);
    bytes += Buffer.byteLength(charAt(i));
  }
  return Buffer.from(text);
}

/** Sends every message (split into `fragments` frames, which may cut a UTF-8 character) and collects the echoes. */
async function exchange(url: string, messages: readonly Sent[]): Promise<Array<{ binary: boolean; data: Buffer }>> {
  const socket = await openClient(url);
  const received: Array<{ binary: boolean; data: Buffer }> = [];
  const all = new Promise<void>((resolve, reject) => {
    if (messages.length === 0) resolve();
    socket.on('message', (data, isBinary) => {
      received.push({ binary: isBinary, data: data as Buffer });
      if (received.length === messages.length) resolve();
    });
    socket.on('close', (code) => reject(new Error(`closed ${code} after ${received.length} of ${messages.length} messages`)));
  });
  for (const message of messages) {
    const data = payload(message);
    const step = Math.ceil(data.length / message.fragments) || 1;
    for (let offset = 0, i = 0; i < message.fragments; i++, offset += step) {
      socket.send(data.subarray(offset, Math.min(data.length, offset + step)), { binary: message.binary, fin: i === message.fragments - 1 });
    }
  }
  await all;
  socket.removeAllListeners('close');
  socket.close(1000);
  return received;
}

t.test('differential: messages come back through the gateway exactly as directly', async (t) => {
  const upstream = await startWsUpstream(t);
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/echo'])]),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const message = fc.record({
    binary: fc.boolean(),
    size: fc.oneof({ weight: 3, arbitrary: fc.integer({ min: 0, max: 300 }) }, { weight: 1, arbitrary: fc.integer({ min: 0, max: 1024 * 1024 }) }),
    fragments: fc.integer({ min: 1, max: 4 }),
    seed: fc.integer({ min: 1, max: 0x7fffffff }),
  });
  let runs = 0;
  await fc.assert(
    fc.asyncProperty(fc.array(message, { minLength: 0, maxLength: 8 }), async (messages) => {
      runs++;
      // The same sequence with other contents on each of three connections at once.
      const variants = [0, 1, 2].map((k) => messages.map((m) => ({ ...m, seed: m.seed + k })));
      const direct = await Promise.all(variants.map((sent) => exchange(`ws://127.0.0.1:${upstream.port}/echo`, sent)));
      const proxied = await Promise.all(variants.map((sent) => exchange(`ws://127.0.0.1:${gateway.port}/echo`, sent)));
      for (let k = 0; k < variants.length; k++) {
        if (direct[k]!.length !== proxied[k]!.length) return false;
        for (let i = 0; i < direct[k]!.length; i++) {
          const want = direct[k]![i]!;
          const got = proxied[k]![i]!;
          if (want.binary !== got.binary || !want.data.equals(got.data)) return false;
          if (!want.data.equals(payload(variants[k]![i]!))) return false;
        }
      }
      return true;
    }),
    { numRuns: 25 },
  );
  t.equal(runs, 25, 'every generated sequence was exchanged both ways');
});

t.test('a client that stops reading pauses the upstream: the worker holds a bounded amount, nothing is lost', async (t) => {
  const CHUNK = 64 * 1024;
  const PUSH = 256 * 1024 * 1024;
  let pushed = 0;
  let sending = false;
  const upstream = await startWsUpstream(t, {
    onConnection: (socket) => {
      // As fast as the gateway takes it: the next message goes once the previous one left this process.
      const chunk = Buffer.alloc(CHUNK, 7);
      const next = (): void => {
        if (!sending || pushed >= PUSH || socket.readyState !== WebSocket.OPEN) return;
        pushed += CHUNK;
        socket.send(chunk, { binary: true }, next);
      };
      socket.on('message', (data) => {
        if (data.toString() === 'go') {
          sending = true;
          next();
        }
      });
    },
  });
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/firehose'])]),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const workerPid = gateway.lines.find((line) => line.msg === 'worker started')?.workerPid as number;
  t.ok(workerPid > 0, 'the worker pid is known');

  const client = await openClient(`ws://127.0.0.1:${gateway.port}/firehose`);
  let received = 0;
  client.on('message', (data) => (received += (data as Buffer).length));
  const rssBefore = rssBytes(workerPid);
  client.pause();
  client.send('go');
  // Let the upstream push until it cannot: the gateway must stop reading it.
  let last = -1;
  for (let i = 0; i < 40 && pushed !== last; i++) {
    last = pushed;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const rssPaused = rssBytes(workerPid);
  t.comment(`upstream sent ${(pushed / 1048576).toFixed(1)} MiB while the client read nothing; worker RSS ${(rssBefore / 1048576).toFixed(1)} -> ${(rssPaused / 1048576).toFixed(1)} MiB`);
  t.ok(pushed < 48 * 1024 * 1024, `the upstream was stopped after ${pushed} of ${PUSH} bytes`);
  t.ok(rssPaused - rssBefore < 48 * 1024 * 1024, `the worker's RSS grew by ${rssPaused - rssBefore} bytes, bounded`);

  client.resume();
  const target = Math.min(pushed + 8 * CHUNK, PUSH);
  for (let i = 0; i < 200 && received < target; i++) await new Promise((resolve) => setTimeout(resolve, 100));
  t.ok(received >= target, `reading again, the client gets what the upstream sends (${received} bytes)`);
  sending = false;
  for (let i = 0; i < 200 && received < pushed; i++) await new Promise((resolve) => setTimeout(resolve, 100));
  t.equal(received, pushed, 'every byte the upstream sent arrived, in full messages');
  client.close();
});

t.test('an upstream that stops reading gets every message intact, in order, once it reads again', async (t) => {
  // Small enough that many frames share one of the worker's reusable write buffers, many enough
  // (9 MiB) to fill the kernel's socket buffers so that writes stay pending.
  const COUNT = 3000;
  const SIZE = 3000;
  const received: Buffer[] = [];
  let upstreamSocket: WebSocket | null = null;
  const upstream = await startWsUpstream(t, {
    onConnection: (socket) => {
      upstreamSocket = socket;
      // Reads nothing at first: the gateway's writes to it stay pending in the worker.
      socket.pause();
      socket.on('message', (data) => received.push(data as Buffer));
    },
  });
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(upstream.location, ['/sink'])]),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
  });
  const client = await openClient(`ws://127.0.0.1:${gateway.port}/sink`);
  const sent = Array.from({ length: COUNT }, (_, i) => payload({ binary: true, size: SIZE + (i % 13), fragments: 1, seed: 1000 + i }));
  // In bursts, so that several messages share one write of the gateway's.
  for (let i = 0; i < COUNT; i++) {
    client.send(sent[i]!, { binary: true });
    if (i % 16 === 15) await new Promise((resolve) => setImmediate(resolve));
  }
  await new Promise((resolve) => setTimeout(resolve, 500));
  t.equal(received.length, 0, 'nothing was read while the upstream was paused');
  t.ok(upstreamSocket !== null, 'the upstream was connected');
  upstreamSocket!.resume();
  for (let i = 0; i < 200 && received.length < COUNT; i++) await new Promise((resolve) => setTimeout(resolve, 50));
  t.equal(received.length, COUNT, 'every message arrived');
  const wrong = received.findIndex((data, i) => !data.equals(sent[i]!));
  t.equal(wrong, -1, 'each arrived whole, with its own contents, in the order sent');
  client.close();
});
