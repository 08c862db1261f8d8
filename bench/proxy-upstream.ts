// Child of bench/proxy.ts: the one upstream every contender proxies to. A uWS app (the cheapest
// server at hand, so the proxies are what is measured) answering every request with the same small
// JSON body. Prints {"port":N} on stdout once listening.
import { loadUws } from '../src/native/uws.js';

const BODY = JSON.stringify({ id: 1347, number: 42, state: 'open', title: 'Found a bug', user: { login: 'octocat', id: 1 } });

const { uws } = loadUws();
const app = uws.App();
app.any('/*', (res) => {
  res.writeStatus('200 OK');
  res.writeHeader('content-type', 'application/json');
  res.end(BODY);
});
app.listen('127.0.0.1', Number(process.argv[2] ?? 0), (socket) => {
  if (socket === false) {
    console.error('upstream: could not listen');
    process.exit(1);
  }
  console.log(JSON.stringify({ port: uws.us_socket_local_port(socket) }));
});
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));
process.on('disconnect', () => process.exit(0));
