/**
 * The peer address from uWS's binary form: dotted IPv4, IPv4-mapped IPv6 back to dotted IPv4, other
 * IPv6 in RFC 5952's form; against real uWS connections (IPv4, and IPv4 and IPv6 to a dual-stack
 * listener), and the last-address shortcut with its slow path (other bytes, other length).
 */
import net from 'node:net';
import t from 'tap';
import { remoteAddress } from '../../src/http/remote-address.js';
import { formatIp, parseIp } from '../../src/http/ip-ranges.js';
import { loadUws } from '../../src/native/uws.js';

const bytes = (...values: number[]): ArrayBuffer => new Uint8Array(values).buffer;
const mapped = (a: number, b: number, c: number, d: number): ArrayBuffer => bytes(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d);

t.test('decoding, and the cache of the last address', async (t) => {
  t.equal(remoteAddress(bytes(127, 0, 0, 1)), '127.0.0.1');
  t.equal(remoteAddress(bytes(127, 0, 0, 1)), '127.0.0.1', 'the same bytes again');
  t.equal(remoteAddress(bytes(127, 0, 0, 2)), '127.0.0.2', 'one byte differs');
  t.equal(remoteAddress(mapped(10, 1, 2, 3)), '10.1.2.3', 'IPv4-mapped IPv6');
  t.equal(remoteAddress(mapped(10, 1, 2, 3)), '10.1.2.3');
  t.equal(remoteAddress(bytes(10, 1, 2, 3)), '10.1.2.3', 'another length, same text');
  // RFC 5952: lower case, no leading zeros, the longest run of zero groups (the first of equal ones) as "::".
  t.equal(remoteAddress(bytes(0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)), '2001:db8::1');
  t.equal(remoteAddress(bytes(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)), '::1');
  t.equal(remoteAddress(bytes(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2)), '::2', 'the last byte differs');
  t.equal(remoteAddress(bytes(0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0)), '2001:db8:0:1::1:0', 'one zero group stays 0');
  t.equal(remoteAddress(bytes(0x20, 0x01, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0xab, 0xcd)), '2001::1:0:0:1:abcd', 'the first of two equal runs');
  t.equal(remoteAddress(bytes(0x20, 0x01, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xab, 0xcd)), '2001:0:0:1::abcd', 'the longer run');
  t.equal(remoteAddress(bytes(0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x1a, 0x2b, 0xff, 0xfe, 0x3c, 0x4d, 0x5e)), 'fe80::21a:2bff:fe3c:4d5e');
});

t.test('real connections: the same address as uWS\'s own text form', async (t) => {
  const { uws } = loadUws();
  const seen: Array<{ ours: string; theirs: string }> = [];
  const app = uws.App();
  app.any('/*', (res) => {
    const theirs = Buffer.from(res.getRemoteAddressAsText()).toString('latin1');
    seen.push({ ours: remoteAddress(res.getRemoteAddress()), theirs });
    res.end('ok');
  });
  const listen = (host: string): Promise<number> =>
    new Promise((resolve, reject) => {
      app.listen(host, 0, (socket) => (socket === false ? reject(new Error(`cannot listen on ${host}`)) : resolve(uws.us_socket_local_port(socket))));
    });
  const ask = (host: string, port: number): Promise<void> =>
    new Promise((resolve, reject) => {
      const socket = net.connect({ host, port }, () => socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n'));
      socket.once('data', () => {
        socket.destroy();
        resolve();
      });
      socket.once('error', reject);
    });
  const v4 = await listen('127.0.0.1');
  await ask('127.0.0.1', v4);
  let dualStack = true;
  let dual = 0;
  try {
    dual = await listen('::');
  } catch {
    dualStack = false;
  }
  if (dualStack) {
    await ask('127.0.0.1', dual);
    await ask('::1', dual).catch(() => {});
  }
  app.close?.();
  t.ok(seen.length >= (dualStack ? 2 : 1));
  for (const { ours, theirs } of seen) {
    const expected = theirs.startsWith('0000:0000:0000:0000:0000:ffff:')
      ? theirs.slice(30).split(':').flatMap((group) => [parseInt(group.slice(0, 2), 16), parseInt(group.slice(2), 16)]).join('.')
      : formatIp(parseIp(theirs)!);
    t.equal(ours, expected, `uWS says ${theirs}`);
  }
});
