/**
 * What an upstream doc's URL looks like where errors show it (logs and the public health report): no
 * user or password, no query values, which may be tokens.
 */
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import t from 'tap';
import { fetchDoc, shownUrl } from '../../src/discovery/fetch-doc.js';

t.test('shownUrl: credentials and query values out, names kept', async (t) => {
  t.equal(shownUrl('http://127.0.0.1:9101/spec'), 'http://127.0.0.1:9101/spec');
  t.equal(shownUrl('http://127.0.0.1:9101/spec?access_token=SECRET'), 'http://127.0.0.1:9101/spec?access_token=…');
  t.equal(shownUrl('http://u:pw@host.example/openapi.json?a=1&b=2&a=3'), 'http://host.example/openapi.json?a=…&b=…');
  t.equal(shownUrl('https://host.example/spec?'), 'https://host.example/spec');
  t.equal(shownUrl('not a url'), '(invalid URL)');
});

t.test('a failed fetch names the doc without its token', async (t) => {
  // A port that refuses: bound, then closed.
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  const error = await fetchDoc(`http://user:pw@127.0.0.1:${port}/spec?access_token=SECRET-TOKEN`, { fetchTimeoutMs: 1000, retries: 0, backoffMs: 0 }).then(
    () => null,
    (err: Error) => err,
  );
  t.ok(error, 'it fails');
  t.match(error!.message, `GET http://127.0.0.1:${port}/spec?access_token=… failed (1 attempt)`);
  t.notMatch(error!.message, /SECRET|pw@/, 'no secret in the message');
});

t.test('a compressed doc is decoded; a broken, unknown or oversized coding is refused with why', async (t) => {
  const doc = { swagger: '2.0', info: { title: 'z', version: '1' }, paths: { '/z': { get: { responses: { 200: { description: 'ok' } } } } } };
  const json = Buffer.from(JSON.stringify(doc));
  const answers: Record<string, [string, Buffer]> = {
    '/gzip': ['gzip', gzipSync(json)],
    '/deflate': ['deflate', deflateSync(json)],
    '/br': ['br', brotliCompressSync(json)],
    '/twice': ['deflate, gzip', gzipSync(deflateSync(json))],
    '/broken': ['gzip', Buffer.from('not gzip at all')],
    '/unknown': ['compress', json],
    // 40 MB of spaces inside a JSON string: a few tens of KB on the wire, past the 32 MiB limit decoded.
    '/bomb': ['gzip', gzipSync(Buffer.concat([Buffer.from('{"x":"'), Buffer.alloc(40 * 1024 * 1024, 0x20), Buffer.from('"}')]))],
  };
  let acceptEncoding: string | undefined;
  const server = createHttpServer((req, res) => {
    acceptEncoding = req.headers['accept-encoding'];
    const [coding, body] = answers[req.url ?? ''] ?? ['identity', json];
    res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': coding, 'content-length': body.length });
    res.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  const options = { fetchTimeoutMs: 5000, retries: 0, backoffMs: 0 };
  for (const path of ['/gzip', '/deflate', '/br', '/twice']) t.same((await fetchDoc(base + path, options)).value, doc, `${path}: decoded`);
  t.match(acceptEncoding, /gzip/, 'the gateway asks for a compressed doc');
  const failure = (path: string) => fetchDoc(base + path, options).then(() => new Error('no error'), (err: Error) => err);
  t.match((await failure('/broken')).message, /Content-Encoding gzip/, 'a broken gzip body: the coding is named');
  t.match((await failure('/unknown')).message, /Content-Encoding "compress", which the gateway does not decode/);
  t.match((await failure('/bomb')).message, /larger than 33554432 bytes/, 'the size limit applies to the decoded doc');
});

t.test('an https:// doc URL served by a plain HTTP server: the error gives OpenSSL\'s reason, not its raw string', async (t) => {
  const server = createHttpServer((_req, res) => res.end('{}'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const port = (server.address() as { port: number }).port;
  const error = await fetchDoc(`https://127.0.0.1:${port}/spec`, { fetchTimeoutMs: 2000, retries: 0, backoffMs: 0 }).then(
    () => null,
    (err: Error) => err,
  );
  t.ok(error, 'it fails');
  t.match(error!.message, /wrong version number/i, 'the reason');
  t.notMatch(error!.message, /SSL routines|\.c:\d+|\n/, 'no thread, routine, source file or line break');
});
