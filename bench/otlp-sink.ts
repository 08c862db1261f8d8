// An OTLP/HTTP traces endpoint for the benches' span-export contenders: reads each export and drops
// it, answering 200 as a collector does; unref'd, so it never keeps a bench alive.
import { createServer } from 'node:http';

/** Starts the sink on 127.0.0.1; resolves with its traces URL. */
export async function startOtlpSink(): Promise<string> {
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  server.unref();
  const address = server.address();
  return `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}/v1/traces`;
}
