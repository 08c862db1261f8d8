/**
 * What an upstream doc's URL looks like where errors show it (logs and the public health report): no
 * user or password, no query values, which may be tokens.
 */
import { createServer } from 'node:net';
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
