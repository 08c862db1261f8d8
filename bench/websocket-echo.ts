// The upstream of bench:ws: a uWS WebSocket echo server on 127.0.0.1:<port> (argv[2]), one process.
import { loadUws } from '../src/native/uws.js';

const port = Number(process.argv[2]);
const { uws } = loadUws();
uws
  .App()
  .ws('/*', {
    maxPayloadLength: 1024 * 1024,
    idleTimeout: 960,
    message: (ws, message, isBinary) => {
      ws.send(message, isBinary);
    },
  })
  .listen('127.0.0.1', port, (socket) => {
    if (socket === false) {
      console.error(`cannot listen on ${port}`);
      process.exit(1);
    }
    console.log(`listening on ${port}`);
  });
