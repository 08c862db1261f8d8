// Child of bench/proxy.ts: fastify + @fastify/http-proxy in front of the bench upstream, with as
// many processes as the gateway has workers (node:cluster), logger off (fastify's default).
// argv: <upstream origin> <port> <processes>. Prints {"ready":true} once every process listens.
import cluster from 'node:cluster';
import fastify from 'fastify';
import proxy from '@fastify/http-proxy';

const [upstream, portText, processesText] = process.argv.slice(2);
const port = Number(portText);
const processes = Number(processesText ?? 2);

if (cluster.isPrimary) {
  let listening = 0;
  for (let i = 0; i < processes; i++) {
    const worker = cluster.fork();
    worker.on('message', (message: unknown) => {
      if (message === 'listening' && ++listening === processes) console.log(JSON.stringify({ ready: true }));
    });
  }
  cluster.on('exit', (_worker, code, signal) => {
    // A worker that dies makes this contender meaningless: stop, the bench sees it.
    console.error(`fastify worker exited (${code ?? signal})`);
    process.exit(1);
  });
  const stop = (): void => {
    cluster.removeAllListeners('exit');
    for (const worker of Object.values(cluster.workers ?? {})) worker?.kill('SIGKILL');
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
} else {
  const app = fastify({ logger: false });
  await app.register(proxy, { upstream, prefix: '/', http2: false });
  await app.listen({ host: '127.0.0.1', port });
  process.send?.('listening');
}
