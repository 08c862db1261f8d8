// Many upgrades in a row through one worker: every client gets the close frame its upstream's answer
// calls for.
// uWS 20.30 closes an asynchronously upgraded client right after the 101, at random, when the
// upgrade is made inside the response's own cork (src/websocket/upgrade-cork.ts, native-notes.md):
// the client then sees the 101 and a FIN, no close frame (1006). With the upgrade made in the held
// response's cork, none does, and uWS.js prints no "writes must be made from within a corked
// callback" warning either. Each upstream answers its 101 together with a frame that breaks the
// protocol (one read for the gateway), and keeps its side open: the case the failure was first seen on.
import t from 'tap';
import { startGateway, testConfig } from '../helpers/gateway-process.js';
import { openClient, closed, rawUpstream, wsUpstreamConfig } from '../helpers/ws-upstream.js';

const UPGRADES = 400;

t.test('hundreds of upgrades: none is closed without a close frame, and uWS warns of nothing', async (t) => {
  const location = await rawUpstream(t, (peer) => {
    // The 101 and a frame with an RSV bit set (no extension was negotiated) in one write: the
    // gateway closes the client with 1011 and the upstream with 1002.
    peer.socket.cork();
    peer.accept();
    peer.socket.write(Buffer.from([0xc1, 0x01, 0x61]));
    peer.socket.uncork();
  });
  const gateway = await startGateway(t, {
    config: testConfig([wsUpstreamConfig(location, ['/w'])]),
    waitFor: (line) => line.msg === 'gateway operational',
    startTimeoutMs: 60_000,
    workers: 1,
    // glibc fills what it frees with 0x10 and keeps no per-thread cache: the memory uWS 20.30 reads
    // as the response's state bits after an upgrade in the response's own cork then reads as
    // "connection close, answered" every time (HTTP_CONNECTION_CLOSE is 0x10), so that path closes
    // the first client already instead of a few in a hundred (seen: upgrade 0, 1, 2 ... closed with
    // 1006). A C library without these tunables ignores them.
    env: { GLIBC_TUNABLES: 'glibc.malloc.perturb=16:glibc.malloc.tcache_count=0' },
  });

  const lost: string[] = [];
  for (let i = 0; i < UPGRADES; i++) {
    const client = await openClient(`ws://127.0.0.1:${gateway.port}/w`);
    const ended = await closed(client);
    if (ended.code !== 1011) lost.push(`upgrade ${i}: closed with ${ended.code}`);
  }
  t.same(lost, [], `all ${UPGRADES} clients got the close frame (1011) that the upstream's broken frame calls for`);
  t.notMatch(gateway.text(), /corked callback/, 'uWS.js printed no warning about writes outside a cork');
});
