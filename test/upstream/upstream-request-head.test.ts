/**
 * The request head the upstream client writes: nothing a caller passes may split it. The check
 * searches the names and values written, joined, once for each forbidden character (instead of scanning
 * each name and value), and a method is checked only when it differs from the last valid one: both
 * shortcuts' other paths are reached here.
 */
import t from 'tap';
import { serializeHead } from '../../src/upstream/upstream-request-head.js';

const HOST = ' HTTP/1.1\r\nhost: 10.0.0.7:8080';

t.test('a well-formed head: Host, the headers in order, the framing the body needs', async (t) => {
  t.equal(serializeHead('GET', '/a?b=1', HOST, ['accept', '*/*', 'x-forwarded-for', '203.0.113.7'], -2), 'GET /a?b=1 HTTP/1.1\r\nhost: 10.0.0.7:8080\r\naccept: */*\r\nx-forwarded-for: 203.0.113.7\r\n\r\n');
  t.equal(serializeHead('POST', '/a', HOST, [], 5), 'POST /a HTTP/1.1\r\nhost: 10.0.0.7:8080\r\ncontent-length: 5\r\n\r\n');
  t.equal(serializeHead('PUT', '/a', HOST, [], -1), 'PUT /a HTTP/1.1\r\nhost: 10.0.0.7:8080\r\ntransfer-encoding: chunked\r\n\r\n');
  t.equal(serializeHead('PATCH', '/a', HOST, [], -2), 'PATCH /a HTTP/1.1\r\nhost: 10.0.0.7:8080\r\ncontent-length: 0\r\n\r\n');
  t.equal(serializeHead('GET', '/', HOST, ['x-a', 'caf\u00e9 \u2603'], -2), 'GET / HTTP/1.1\r\nhost: 10.0.0.7:8080\r\nx-a: caf\u00e9 \u2603\r\n\r\n', 'non-ASCII values are not line breaks');
});

t.test('any CR, LF, NUL or U+FFFD (bytes uWS could not decode) in a name or value refuses the whole head', async (t) => {
  for (const [name, value] of [
    ['x-a', 'one\r\nx-injected: 1'],
    ['x-a', 'lone\nlf'],
    ['x-a', 'lone\rcr'],
    ['x-a', 'trailing\r\n'],
    ['x-a', 'nul\0byte'],
    ['x-a\r\nx-injected', 'in the name'],
    ['x-a\n', 'lf in the name'],
    ['x-a', 'not utf-8: a\uFFFDb'],
  ] as [string, string][]) {
    t.equal(serializeHead('GET', '/a', HOST, ['accept', '*/*', name, value, 'x-b', '2'], -2), null, JSON.stringify([name, value]));
  }
  // Dropped headers never reach the head, whatever they hold.
  t.equal(serializeHead('GET', '/a', HOST, ['connection', 'close\r\nx-injected: 1', 'content-length', '5\r\n'], -2), 'GET /a HTTP/1.1\r\nhost: 10.0.0.7:8080\r\n\r\n');
});

t.test('method and target: checked; a method other than the last valid one is checked again', async (t) => {
  t.not(serializeHead('GET', '/a', HOST, [], -2), null);
  t.equal(serializeHead('G ET', '/a', HOST, [], -2), null, 'not a token');
  t.equal(serializeHead('GET\r\n', '/a', HOST, [], -2), null);
  t.not(serializeHead('PROPFIND', '/a', HOST, [], -2), null, 'any token');
  t.equal(serializeHead('PROPFIND\n', '/a', HOST, [], -2), null, 'after another valid method');
  t.not(serializeHead('PROPFIND', '/a', HOST, [], -2), null);
  t.equal(serializeHead('GET', '/a b', HOST, [], -2), null, 'a space in the target');
  t.equal(serializeHead('GET', '/a\u00e9', HOST, [], -2), null, 'non-ASCII in the target');
  t.equal(serializeHead('GET', '', HOST, [], -2), null, 'an empty target');
});

t.test('line starts are kept per position in the header list: a name seen before is not trusted for its content alone', async (t) => {
  const ok = (headers: string[]): string | null => serializeHead('GET', '/a', HOST, headers, -2);
  t.equal(ok(['x-a', '1', 'x-b', '2']), 'GET /a HTTP/1.1\r\nhost: 10.0.0.7:8080\r\nx-a: 1\r\nx-b: 2\r\n\r\n');
  // The same names again (kept), then others at the same positions (made anew), then back.
  t.equal(ok(['x-a', '3', 'x-b', '4']), 'GET /a HTTP/1.1\r\nhost: 10.0.0.7:8080\r\nx-a: 3\r\nx-b: 4\r\n\r\n');
  t.equal(ok(['x-c', '5', 'x-a', '6']), 'GET /a HTTP/1.1\r\nhost: 10.0.0.7:8080\r\nx-c: 5\r\nx-a: 6\r\n\r\n');
  t.equal(ok(['x-a', '7', 'x-b', '8']), 'GET /a HTTP/1.1\r\nhost: 10.0.0.7:8080\r\nx-a: 7\r\nx-b: 8\r\n\r\n');
  // A pool-owned name where a kept one was: still dropped.
  t.equal(ok(['content-length', '9', 'x-b', '8']), 'GET /a HTTP/1.1\r\nhost: 10.0.0.7:8080\r\nx-b: 8\r\n\r\n');
  // A refused name is refused every time, at any position, and refusing forgets what was kept.
  for (let round = 0; round < 2; round++) t.equal(ok(['x-a', '1', 'x-b\r\nx-injected', '2']), null, `round ${round}`);
  for (let round = 0; round < 2; round++) t.equal(ok(['x-b\r\nx-injected', '2', 'x-a', '1']), null, `round ${round}, first`);
  t.equal(ok(['x-a', 'bad\nvalue', 'x-b', '2']), null, 'a refused value');
  t.equal(ok(['x-a', '1', 'x-b', '2']), 'GET /a HTTP/1.1\r\nhost: 10.0.0.7:8080\r\nx-a: 1\r\nx-b: 2\r\n\r\n');
  // Names differing only in case are different names.
  t.equal(ok(['X-A', '1', 'x-b', '2']), 'GET /a HTTP/1.1\r\nhost: 10.0.0.7:8080\r\nX-A: 1\r\nx-b: 2\r\n\r\n');
});
