/**
 * The response parser reads header names and values 4 bytes at a time while all of them are plain
 * (letters and '-' in a name; no control byte or DEL in a value) and byte by byte through a word that
 * holds anything else, and classifies names by comparing words. Every byte value at every position of
 * a word is checked here against the byte rules of http-chars.ts (TOKEN, VALUE), so both paths are
 * reached for each, and every framing or hop-by-hop name in any case against its near misses.
 */
import t from 'tap';
import { ResponseParser, PARSE_FAILED, type ResponseHead } from '../../src/upstream/response-parser.js';
import { TOKEN, VALUE, ValueByte } from '../../src/upstream/http-chars.js';

type Outcome = { ok: true; head: ResponseHead } | { ok: false; error: string };

function parse(bytes: Buffer): Outcome {
  let head: ResponseHead | null = null;
  const parser = new ResponseParser(
    {
      onResponseHead: (h) => {
        head = h;
        return true;
      },
      onResponseBody: () => true,
      onResponseEnd: () => {},
    },
    16 * 1024,
  );
  parser.start(false);
  // Offset 3 inside a larger buffer: words are read unaligned, as from a connection's read buffer.
  const data = Buffer.alloc(bytes.length + 8, 0x41);
  bytes.copy(data, 3);
  const at = parser.execute(data, 3, 3 + bytes.length);
  if (at === PARSE_FAILED) return { ok: false, error: parser.error };
  return head === null ? { ok: false, error: 'incomplete' } : { ok: true, head };
}

function answer(headerLines: Buffer[]): Buffer {
  return Buffer.concat([Buffer.from('HTTP/1.1 200 OK\r\n', 'latin1'), ...headerLines, Buffer.from('content-length: 0\r\n\r\n', 'latin1')]);
}

function names(head: ResponseHead): string[] {
  const out: string[] = [];
  const headers = head.headers;
  for (let i = 0; i < headers.length; i += 2) out.push(headers[i]!.toString('latin1'));
  return out;
}

t.test('a value byte at each position of a word: accepted exactly when VALUE allows it', async (t) => {
  let checked = 0;
  for (let length = 1; length <= 9; length++) {
    for (let at = 0; at < length; at++) {
      for (let b = 0; b < 256; b++) {
        // CR is where the value ends: a CR not followed by LF is refused either way.
        if (b === 0x0d) continue;
        const value = Buffer.alloc(length, 0x61);
        value[at] = b;
        // A value's leading and trailing SP/HTAB are trimmed, not part of it.
        const trimmed = VALUE[b] === ValueByte.Space && (at === 0 || at === length - 1);
        const result = parse(answer([Buffer.from('x-v: ', 'latin1'), value, Buffer.from('\r\n', 'latin1')]));
        const allowed = VALUE[b] !== ValueByte.Invalid;
        if (result.ok !== allowed) {
          t.fail(`value byte 0x${b.toString(16)} at ${at} of ${length}: ${result.ok ? 'accepted' : `refused (${result.error})`}`);
          return;
        }
        if (result.ok && !trimmed) {
          const got = result.head.headers[1]!;
          if (!got.equals(value)) {
            t.fail(`value byte 0x${b.toString(16)} at ${at} of ${length}: read as ${JSON.stringify(got.toString('latin1'))}`);
            return;
          }
        }
        checked++;
      }
    }
  }
  t.pass(`${checked} values`);
});

t.test('a name byte at each position of a word: accepted exactly when it is a tchar', async (t) => {
  let checked = 0;
  for (let length = 1; length <= 9; length++) {
    for (let at = 0; at < length; at++) {
      for (let b = 0; b < 256; b++) {
        const name = Buffer.alloc(length, 0x78);
        name[at] = b;
        // A colon ends the name early; what follows is then a value (allowed unless it holds controls).
        if (b === 0x3a) continue;
        const result = parse(answer([name, Buffer.from(': 1\r\n', 'latin1')]));
        const allowed = TOKEN[b] === 1;
        if (result.ok !== allowed) {
          t.fail(`name byte 0x${b.toString(16)} at ${at} of ${length}: ${result.ok ? 'accepted' : `refused (${result.error})`}`);
          return;
        }
        if (result.ok && !result.head.headers[0]!.equals(name)) {
          t.fail(`name byte 0x${b.toString(16)} at ${at} of ${length}: read as ${JSON.stringify(result.head.headers[0]!.toString('latin1'))}`);
          return;
        }
        checked++;
      }
    }
  }
  t.pass(`${checked} names`);
});

t.test('framing and hop-by-hop names in any case are recognized; a name one byte off is an ordinary header', async (t) => {
  const dropped = ['te', 'trailer', 'upgrade', 'keep-alive', 'proxy-connection', 'proxy-authenticate', 'proxy-x'];
  for (const name of [...dropped, 'connection']) {
    for (const variant of [name, name.toUpperCase(), name.replace(/(^|-)([a-z])/g, (m) => m.toUpperCase())]) {
      const result = parse(answer([Buffer.from(`${variant}: x\r\nx-after: 1\r\n`, 'latin1')]));
      t.ok(result.ok, variant);
      if (result.ok) t.same(names(result.head), ['x-after'], `${variant} is not passed on`);
    }
    for (let i = 0; i < name.length; i++) {
      // One byte changed to another letter or digit: not the hop-by-hop name any more.
      const c = name.charCodeAt(i);
      const other = String.fromCharCode(c === 0x7a ? 0x61 : c === 0x2d ? 0x30 : c + 1);
      const near = name.slice(0, i) + other + name.slice(i + 1);
      if (near.startsWith('proxy-')) continue;
      const result = parse(answer([Buffer.from(`${near}: x\r\n`, 'latin1')]));
      t.ok(result.ok && names(result.head).includes(near), `${near} is passed on`);
    }
  }
  for (const variant of ['Content-Length', 'CONTENT-LENGTH', 'content-length']) {
    const result = parse(Buffer.from(`HTTP/1.1 200 OK\r\n${variant}: 5\r\n\r\nhello`, 'latin1'));
    t.ok(result.ok && result.head.contentLength === 5, variant);
  }
  for (const variant of ['Transfer-Encoding', 'TRANSFER-ENCODING']) {
    const result = parse(Buffer.from(`HTTP/1.1 200 OK\r\n${variant}: chunked\r\n\r\n`, 'latin1'));
    t.ok(result.ok && result.head.contentLength === -1, variant);
  }
  for (const near of ['content-lengtg', 'dontent-length', 'content_length', 'transfer-encodinf', 'sransfer-encoding', 'content-lenxth']) {
    const result = parse(answer([Buffer.from(`${near}: 5\r\n`, 'latin1')]));
    t.ok(result.ok && names(result.head).includes(near) && result.head.contentLength === 0, `${near} is an ordinary header`);
  }
});

t.test('the status line: HTTP/1.0 and HTTP/1.1 only, byte by byte', async (t) => {
  t.ok(parse(Buffer.from('HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n')).ok);
  t.ok(parse(Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n')).ok);
  const line = 'HTTP/1.1';
  for (let i = 0; i < line.length; i++) {
    const bad = line.slice(0, i) + (line[i] === 'X' ? 'Y' : 'X') + line.slice(i + 1);
    t.notOk(parse(Buffer.from(`${bad} 200 OK\r\ncontent-length: 0\r\n\r\n`)).ok, bad);
  }
  t.notOk(parse(Buffer.from('http/1.1 200 OK\r\ncontent-length: 0\r\n\r\n')).ok, 'the protocol name is case-sensitive');
});
