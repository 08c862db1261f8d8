import t from 'tap';
import { existsSync } from 'node:fs';
import { request } from 'undici';
import { loadFirstOf, loadUws } from '../../src/native/uws.js';
import { closedPort } from '../helpers/raw-http.js';
import type { UwsListenSocket } from '../../src/native/uws-types.js';

const KNOWN_BUILDS = ['uWebSockets.js', '@btc-vision/uwebsockets.js', '@trufflesuite/uws-js-unofficial'];

function listen(app: ReturnType<ReturnType<typeof loadUws>['uws']['App']>, port: number): Promise<UwsListenSocket | false> {
  return new Promise((resolve) => app.listen('127.0.0.1', port, resolve));
}

t.test('loads a native build and says which', async (t) => {
  const loaded = loadUws();
  t.ok(KNOWN_BUILDS.includes(loaded.build), `build ${loaded.build}`);
  t.match(loaded.version, /^\d+\.\d+\.\d+/);
  t.match(loaded.binary, new RegExp(`uws_${process.platform}_${process.arch}_${process.versions.modules}\\.node$`));
  t.ok(existsSync(loaded.binary), 'the binary file exists');
  t.equal(typeof loaded.uws.App, 'function');
  t.equal(loadUws(), loaded, 'cached: one build per process');
  t.same(JSON.parse(JSON.stringify(loaded)), { build: loaded.build, version: loaded.version, binary: loaded.binary }, 'logs without the module');
  t.comment(`native build: ${loaded.build}@${loaded.version} (${loaded.binary})`);
});

t.test('no loadable build: one error naming every attempt and native-notes.md', async (t) => {
  const candidates = [
    { pkg: 'uWebSockets.js-not-installed-here', binaryDir: '.' },
    { pkg: '@trufflesuite/uws-js-unofficial', binaryDir: 'binaries' },
  ];
  const err = (() => {
    try {
      loadFirstOf(candidates, 'uws_linux_x64_999.node');
      return null;
    } catch (e) {
      return e as Error;
    }
  })();
  t.ok(err, 'throws');
  t.match(err!.message, /uWebSockets\.js-not-installed-here: not installed/);
  t.match(err!.message, /@trufflesuite\/uws-js-unofficial: v[\d.]+\S* ships no uws_linux_x64_999\.node \(it has: /);
  t.match(err!.message, /native-notes\.md/);
  t.match(err!.message, /no JS fallback/);
});

t.test('a uWS app answers a request', async (t) => {
  const { uws } = loadUws();
  const app = uws.App();
  app.get('/*', (res) => {
    res.writeHeader('content-type', 'text/plain').end('native hello');
  });
  const socket = await listen(app, 0);
  t.ok(socket, 'listening');
  if (!socket) return;
  t.teardown(() => uws.us_listen_socket_close(socket));
  const port = uws.us_socket_local_port(socket);
  const res = await request(`http://127.0.0.1:${port}/hello`);
  t.equal(res.statusCode, 200);
  t.equal(await res.body.text(), 'native hello');
});

t.test('default listen options share a fixed port (SO_REUSEPORT) and the kernel spreads connections', async (t) => {
  const { uws } = loadUws();
  const served = [0, 0];
  const apps = [0, 1].map((i) =>
    uws.App().get('/*', (res) => {
      served[i]!++;
      res.end(String(i), true);
    }),
  );
  // uSockets sets SO_REUSEPORT only for a non-zero port: with port 0 the second bind would fail.
  const port = await closedPort();
  const first = await listen(apps[0]!, port);
  t.ok(first, 'first app listening');
  if (!first) return;
  const second = await listen(apps[1]!, port);
  t.ok(second, 'second app bound the same port');
  t.teardown(() => {
    uws.us_listen_socket_close(first);
    if (second) uws.us_listen_socket_close(second);
  });
  for (let i = 0; i < 40; i++) {
    // A new connection each time (the app closes it), so the kernel hashes each one afresh.
    const res = await request(`http://127.0.0.1:${port}/`, { reset: true });
    await res.body.text();
  }
  t.equal(served[0]! + served[1]!, 40);
  t.ok(served[0]! > 0 && served[1]! > 0, `both listeners got connections (${served.join(' / ')})`);
});
