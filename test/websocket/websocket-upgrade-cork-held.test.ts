// The held response upgrades are corked in (src/websocket/upgrade-cork.ts), in this process with the
// uWS binary the gateway loads: held once open() resolves; a request to its listener other than the
// worker's own is closed unanswered; when the held one is lost the operator is told and another is
// held; before there is one (or after close) an upgrade is corked in the client's own response.
import net from 'node:net';
import t from 'tap';
import { loadUws } from '../../src/native/uws.js';
import { UpgradeCork } from '../../src/websocket/upgrade-cork.js';
import type { UwsResponse } from '../../src/native/uws-types.js';
import { eventually } from '../helpers/gateway-process.js';

/** A stand-in for the client's response: records whether the upgrade ran in its cork. */
function clientResponse(): { res: UwsResponse; corked: () => number } {
  let corked = 0;
  const res = {
    cork(fn: () => void) {
      corked++;
      fn();
      return res;
    },
  } as unknown as UwsResponse;
  return { res, corked: () => corked };
}

t.test('held, refused to others, held again when lost, and the fallback before and after', async (t) => {
  const lost: string[] = [];
  const cork = new UpgradeCork(loadUws().uws, (detail) => lost.push(detail));
  t.teardown(() => cork.close());

  const before = clientResponse();
  let ran = 0;
  cork.upgrade(before.res, () => ran++);
  t.equal(before.corked(), 1, 'before open(): the upgrade runs in the client response own cork');
  t.equal(ran, 1);

  await cork.open();
  t.ok(cork.ready, 'open() resolves with the response held');
  t.ok(cork.listenPort > 0, 'on a loopback port of its own');
  const held = clientResponse();
  cork.upgrade(held.res, () => ran++);
  t.equal(held.corked(), 0, 'held: the client response own cork is not used');
  t.equal(ran, 2, 'and the upgrade ran');

  // Another local process asking the listener anything: closed unanswered.
  const answer = await new Promise<string>((resolve) => {
    const socket = net.connect(cork.listenPort, '127.0.0.1', () => socket.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n'));
    let text = '';
    socket.on('data', (chunk) => (text += chunk.toString()));
    socket.on('error', () => {});
    socket.on('close', () => resolve(text));
  });
  t.equal(answer, '', 'a request that is not the worker own is closed without an answer');
  t.ok(cork.ready, 'and the held response stays held');

  // The held request's connection goes: the operator is told, and another is held.
  (cork as unknown as { client: net.Socket }).client.destroy();
  await eventually(async () => (lost.length === 1 ? true : undefined), 5000, 50, 'the loss reported');
  t.match(lost[0], /asking for another/);
  await eventually(async () => (cork.ready ? true : undefined), 5000, 50, 'held again');
  const again = clientResponse();
  cork.upgrade(again.res, () => ran++);
  t.equal(again.corked(), 0, 'upgrades go through the new one');

  cork.close();
  t.notOk(cork.ready, 'closed: nothing held');
  const after = clientResponse();
  cork.upgrade(after.res, () => ran++);
  t.equal(after.corked(), 1, 'after close(): the client response own cork again');
  t.equal(ran, 4);
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.equal(lost.length, 1, 'closing is not reported as a loss');
});
