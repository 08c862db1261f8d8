// Child of bench/proxy.ts: fastify + @fastify/http-proxy in front of the bench upstream, with as
// many processes as the gateway has workers (node:cluster), logger off (fastify's default).
// argv: <upstream origin> <port> <processes>. Prints {"ready":true} once every process listens.
import fastify from 'fastify';
import proxy from '@fastify/http-proxy';
import { runClusterContender } from './cluster-contender.js';

const [upstream, portText, processesText] = process.argv.slice(2);
if (upstream === undefined) throw new Error('usage: node dist/bench/proxy-fastify.js <upstream origin> <port> [processes]');
const port = Number(portText);
const processes = Number(processesText ?? 2);

runClusterContender('fastify', processes, async () => {
  const app = fastify({ logger: false });
  await app.register(proxy, { upstream, prefix: '/', http2: false });
  await app.listen({ host: '127.0.0.1', port });
  process.send?.('listening');
});
