import { gcraPolicy } from '../src/stores/gcra.js';
import { LeaseBank } from '../src/stores/lease-bank.js';
import { LeaseClient } from '../src/stores/lease-client.js';
import type { LeaseBankMessage } from '../src/stores/lease-messages.js';
import { LeaseSim, settle } from '../test/helpers/lease-sim.js';

// node dist/bench/stores.js (after npm run build) — the `local` store's costs:
// 1. a take answered from the worker's lease (ns/op, the request path's cost);
// 2. IPC messages per 1,000 requests at steady load, in the in-process simulation (virtual clock, so
//    the figures do not depend on the machine).

const MEASURE_MS = Number(process.env.BENCH_MS ?? 3000);

function leaseTakeCost(): void {
  // One worker wired straight to a bank: a refill is a synchronous round trip, so the loop measures
  // takes, nearly all answered from the lease (the share is printed).
  let client: LeaseClient;
  const bank = new LeaseBank({ sweepIntervalMs: 0, send: (_w, message: LeaseBankMessage) => client.receive(message) });
  client = new LeaseClient({ sweepIntervalMs: 0, send: (message) => bank.receive(1, message) });
  const policy = gcraPolicy(10_000_000, 1000);
  const keys = Array.from({ length: 64 }, (_, i) => `limit|GET /users/{id}|10.0.${i >> 8}.${i & 255}`);
  for (let i = 0; i < 200_000; i++) client.take(keys[i & 63]!, policy); // warm-up, leases grown
  let ops = 0;
  let admitted = 0;
  const started = process.hrtime.bigint();
  const until = started + BigInt(MEASURE_MS) * 1_000_000n;
  let now = started;
  while (now < until) {
    for (let i = 0; i < 10_000; i++) {
      const decision = client.take(keys[i & 63]!, policy);
      if (!(decision instanceof Promise) && decision.admitted) admitted++;
    }
    ops += 10_000;
    now = process.hrtime.bigint();
  }
  const ns = Number(now - started) / ops;
  const stats = client.stats();
  // The floor any take pays, measured in the same run: a Map lookup of the key and a clock reading.
  const floor = new Map(keys.map((key) => [key, { n: 0 }]));
  let sink = 0;
  const floorStarted = process.hrtime.bigint();
  for (let i = 0; i < 2_000_000; i++) {
    floor.get(keys[i & 63]!)!.n++;
    sink += Date.now() & 1;
  }
  const floorNs = Number(process.hrtime.bigint() - floorStarted) / 2_000_000;
  console.log(
    `local take (64 hot keys, answered from the lease): ${ns.toFixed(1)} ns/op, ${(1e9 / ns / 1e6).toFixed(2)} M takes/s; ` +
      `${((stats.local / stats.takes) * 100).toFixed(2)}% without a round trip, ${admitted} admitted synchronously; ` +
      `Map.get + Date.now in the same run: ${floorNs.toFixed(1)} ns${sink < 0 ? '' : ''}`,
  );
  client.close();
  bank.close();
}

async function messagesPerThousand(label: string, workers: number, perWorkerPerSecond: number, limit: number, windowMs: number, seconds: number): Promise<void> {
  const sim = new LeaseSim({ workers });
  const policy = gcraPolicy(limit, windowMs);
  let requests = 0;
  let admitted = 0;
  const credit = new Array<number>(workers).fill(0);
  for (let ms = 0; ms < seconds * 1000; ms++) {
    sim.now++;
    if (ms % 25 === 0) {
      sim.sweep(); // the sweep timer's default period
      sim.drain();
    }
    for (let w = 0; w < workers; w++) {
      credit[w]! += perWorkerPerSecond / 1000;
      while (credit[w]! >= 1) {
        credit[w]!--;
        requests++;
        if ((await settle(sim, sim.take(w, 'limit|global|hot', policy))).admitted) admitted++;
      }
    }
  }
  console.log(
    `${label}: ${workers} workers × ${perWorkerPerSecond} req/s, limit ${limit}/${windowMs} ms: ` +
      `${((sim.messages / requests) * 1000).toFixed(1)} IPC messages per 1,000 requests (${admitted} of ${requests} admitted)`,
  );
  sim.close();
}

leaseTakeCost();
await messagesPerThousand('hot key under its limit', 2, 1000, 1_000_000, 60_000, 10);
await messagesPerThousand('hot key under its limit', 4, 5000, 1_000_000, 60_000, 5);
await messagesPerThousand('hot key at 90% of its limit', 2, 450, 1000, 1000, 10);
await messagesPerThousand('hot key over its limit (×1.2)', 4, 300, 1000, 1000, 10);
await messagesPerThousand('hot key far over a small limit', 4, 1000, 100, 60_000, 10);
await messagesPerThousand('cold key (one request per 5 s per worker)', 2, 0.2, 100, 60_000, 100);
