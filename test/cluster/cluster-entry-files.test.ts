// Both ways to run the gateway: the bundles `npm start` and the `gateway` bin run (dist/bundle/) and the
// compiled modules (dist/src/). Each starts its workers from its own kind of file (src/cluster/entry-files.ts),
// compiles the upstream's doc into a table with its own kind of compile task (a table this small in
// the primary itself, src/cluster/compile-runner.ts; test/cluster/cluster-template-size.test.ts has one
// on the compile thread), and routes by it.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import t from 'tap';
import { httpRequest, MAIN, MODULE_MAIN, startGateway, startUpstream, swaggerDoc, testConfig } from '../helpers/gateway-process.js';

const ways = [
  { name: 'the bundle', main: MAIN, workerName: 'dist/bundle/worker.mjs', workerFile: /[/\\]dist[/\\]bundle[/\\]worker\.mjs$/ },
  { name: 'the compiled modules', main: MODULE_MAIN, workerName: 'dist/src/cluster/worker.js', workerFile: /[/\\]dist[/\\]src[/\\]cluster[/\\]worker\.js$/ },
];

for (const way of ways) {
  t.test(`run from ${way.name}: workers start from ${way.workerName}, requests are routed`, async (t) => {
    const upstream = await startUpstream(t, { name: 'items', spec: swaggerDoc('items', { '/items/{id}': ['GET'] }) });
    const gateway = await startGateway(t, {
      main: way.main,
      workers: 1,
      config: testConfig([{ serviceType: 'swagger2', serviceLocation: upstream.location }]),
      waitFor: (line) => line.msg === 'gateway operational',
    });

    const routed = await httpRequest(gateway.port, '/items/7');
    t.equal(routed.status, 200, 'a templated path reaches the upstream');
    t.equal((JSON.parse(routed.body) as { upstream: string }).upstream, 'items');
    const unrouted = await httpRequest(gateway.port, '/nothing/here');
    t.equal(unrouted.status, 404, 'a path outside the table is answered by the gateway');
    t.match(unrouted.headers['content-type'], /problem\+json/);

    const compiled = gateway.lines.filter((line) => line.msg === 'routing table compiled');
    t.ok(compiled.length > 0 && compiled.every((line) => line.compiledOn === 'inline'), 'the table was compiled in the primary');

    const workerPids = [...new Set(gateway.lines.filter((line) => line.role === 'worker').map((line) => line.pid))];
    t.equal(workerPids.length, 1, 'one worker logged');
    for (const pid of workerPids) {
      const command = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
      t.match(command.at(-1), way.workerFile, `worker ${pid} runs ${command.at(-1)}`);
    }
  });
}

// V8 keeps a module's source for lazy compilation, as a two-byte string if one character of it is
// past ASCII: each process would hold its bundle at twice the size (src/cli/bundle-write.ts). And
// src/metrics/hdr.ts takes hdr-histogram-js's parts without its index, whose log writer makes an
// Intl.NumberFormat as it loads (ICU's start-up in every process).
t.test("the bundles are ASCII only and carry no hdr-histogram-js log writer or reader", async (t) => {
  const dir = dirname(MAIN);
  const bundles = readdirSync(dir).filter((name) => name.endsWith('.mjs'));
  t.same(bundles.sort(), ['compile-task.mjs', 'gateway.mjs', 'worker.mjs']);
  for (const name of bundles) {
    const bytes = readFileSync(join(dir, name));
    const at = bytes.findIndex((byte) => byte > 0x7f);
    t.equal(at, -1, `${name}: no byte past ASCII${at === -1 ? '' : ` (at ${at}: ${JSON.stringify(bytes.subarray(Math.max(0, at - 40), at + 10).toString())})`}`);
    t.notMatch(bytes.toString('latin1'), /hdr-histogram-js\/dist\/HistogramLog(?:Writer|Reader)\.js/, `${name}: no log writer or reader`);
  }
});
