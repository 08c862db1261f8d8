// The upstream leg's RFC 6455 framing (src/websocket/frames.ts) against `ws` as the reference: frames
// ws's Sender writes as a server (unmasked, fragmented or not, with pings and a close between
// fragments), cut at random points as TCP may, must be read by FrameReader as ws's own Receiver reads
// them; frames encodeFrameInto writes one after another into one buffer (masked, as a client must) must
// be read by ws's Receiver as the same messages. And what the reader must refuse, with the close code that says why.
import fc from 'fast-check';
import t from 'tap';
import { createRequire } from 'node:module';
import { encodeFrameInto, FrameBuffer, FrameReader, frameSize, OPCODE_BINARY, OPCODE_CLOSE, OPCODE_PING, OPCODE_TEXT, closePayload, type FrameSink } from '../../src/websocket/frames.js';

// ws exports its Sender and Receiver at run time; @types/ws does not declare them.
interface WsSender {
  frame(data: Buffer, options: { fin: boolean; rsv1: boolean; opcode: number; mask: boolean; readOnly: boolean }): Buffer[];
}
interface WsReceiver {
  on(event: 'message', listener: (data: Buffer, isBinary: boolean) => void): void;
  on(event: 'error', listener: (err: Error) => void): void;
  write(chunk: Buffer): void;
}
const ws = createRequire(import.meta.url)('ws') as { Sender: WsSender; Receiver: new (options: { isServer: boolean; maxPayload: number }) => WsReceiver };
const { Sender, Receiver } = ws;

type Event = ['message', string, boolean] | ['ping', string] | ['close', number, string] | ['violation', number];

function collector(): { sink: FrameSink; events: Event[] } {
  const events: Event[] = [];
  return {
    events,
    sink: {
      onMessage: (data, isBinary) => events.push(['message', Buffer.from(data).toString('hex'), isBinary]),
      onPing: (payload) => events.push(['ping', Buffer.from(payload).toString('hex')]),
      onPong: () => {},
      onCloseFrame: (code, reason) => events.push(['close', code, reason]),
      onViolation: (code) => events.push(['violation', code]),
    },
  };
}

/** Server frames as ws writes them (unmasked). */
function serverFrame(opcode: number, data: Buffer, fin: boolean): Buffer {
  return Buffer.concat(Sender.frame(data, { fin, rsv1: false, opcode, mask: false, readOnly: false }));
}

/** Frames encoded one after another into one buffer, as the upstream leg writes a turn's messages. */
function encodeAll(frames: ReadonlyArray<{ opcode: number; data: Buffer }>): Buffer {
  const out = new FrameBuffer(Buffer.alloc(frames.reduce((size, frame) => size + frameSize(frame.data.length), 0)));
  let at = 0;
  for (const frame of frames) at = encodeFrameInto(out, at, frame.opcode, frame.data);
  if (at !== out.bytes.length) throw new Error(`the frames end at ${at}, their sizes add up to ${out.bytes.length}`);
  return out.bytes;
}

const text = fc.string({ unit: 'grapheme', maxLength: 300 }).map((s) => Buffer.from(s));
const binary = fc.uint8Array({ maxLength: 70_000 }).map((a) => Buffer.from(a));
const message = fc.record({ binary: fc.boolean(), fragments: fc.integer({ min: 1, max: 4 }), ping: fc.boolean() }).chain((shape) =>
  (shape.binary ? binary : text).map((data) => ({ ...shape, data })),
);

t.test('FrameReader reads what ws writes as a server, cut anywhere', async (t) => {
  fc.assert(
    fc.property(fc.array(message, { minLength: 1, maxLength: 6 }), fc.array(fc.integer({ min: 1, max: 5000 }), { minLength: 1, maxLength: 20 }), (messages, cuts) => {
      const frames: Buffer[] = [];
      const expected: Event[] = [];
      for (const m of messages) {
        const opcode = m.binary ? OPCODE_BINARY : OPCODE_TEXT;
        const step = Math.ceil(m.data.length / m.fragments) || 1;
        const pieces: Buffer[] = [];
        for (let at = 0; at < m.data.length; at += step) pieces.push(m.data.subarray(at, at + step));
        if (pieces.length === 0) pieces.push(Buffer.alloc(0));
        pieces.forEach((piece, i) => {
          frames.push(serverFrame(i === 0 ? opcode : 0, piece, i === pieces.length - 1));
          // A control frame may come between the fragments of a message (RFC 6455 5.4).
          if (m.ping && i === 0 && pieces.length > 1) {
            frames.push(serverFrame(OPCODE_PING, Buffer.from('p'), true));
            expected.push(['ping', Buffer.from('p').toString('hex')]);
          }
        });
        expected.push(['message', m.data.toString('hex'), m.binary]);
      }
      frames.push(serverFrame(OPCODE_CLOSE, closePayload(4001, 'bye'), true));
      expected.push(['close', 4001, 'bye']);
      const stream = Buffer.concat(frames);
      const { sink, events } = collector();
      const reader = new FrameReader(sink, 1 << 20);
      let at = 0;
      for (let i = 0; at < stream.length; i++) {
        const size = cuts[i % cuts.length]!;
        const piece = stream.subarray(at, at + size);
        // Every other read as the upstream leg pushes its shared read buffer: bytes past `end` are not read.
        if (i % 2 === 0) reader.push(piece);
        else reader.push(Buffer.concat([piece, Buffer.alloc(7, 0x81)]), piece.length);
        at += size;
      }
      t.same(events, expected);
      return true;
    }),
    { numRuns: 150 },
  );
});

t.test("ws's Receiver (as a server) reads what encodeFrameInto writes", async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.array(message, { minLength: 1, maxLength: 6 }), async (messages) => {
      const receiver = new Receiver({ isServer: true, maxPayload: 1 << 20 });
      const got: Event[] = [];
      receiver.on('message', (data, isBinary) => got.push(['message', data.toString('hex'), isBinary]));
      const failed: Error[] = [];
      receiver.on('error', (err) => failed.push(err));
      receiver.write(encodeAll(messages.map((m) => ({ opcode: m.binary ? OPCODE_BINARY : OPCODE_TEXT, data: m.data }))));
      await new Promise((resolve) => setImmediate(resolve));
      t.same(failed, []);
      t.same(
        got,
        messages.map((m) => ['message', m.data.toString('hex'), m.binary]),
      );
      return true;
    }),
    { numRuns: 100 },
  );
});

t.test('masked through the DataView and through the Int32Array alike, at every alignment of the buffer', async (t) => {
  // Payloads from 256 bytes on take the Int32Array path (maskInPlace), smaller ones the DataView's
  // (whole words, then up to three bytes); the frame may start anywhere, in a buffer that may itself
  // start anywhere in its memory.
  const sizes = [0, 1, 3, 4, 5, 125, 126, 255, 256, 257, 258, 259, 260, 1023, 65535, 65536, 70001];
  let checked = 0;
  for (const size of sizes) {
    const data = Buffer.alloc(size);
    for (let i = 0; i < size; i++) data[i] = (i * 31 + size) & 0xff;
    for (let offset = 0; offset < 8; offset++) {
      const out = Buffer.alloc(offset % 3 + offset + frameSize(size)).subarray(offset % 3);
      const end = encodeFrameInto(new FrameBuffer(out), offset, OPCODE_BINARY, data);
      t.equal(end, out.length, `the frame of ${size} bytes ends where its size says`);
      const receiver = new Receiver({ isServer: true, maxPayload: 1 << 20 });
      const got: Buffer[] = [];
      receiver.on('message', (message) => got.push(message));
      receiver.on('error', (err) => t.fail(err.message));
      receiver.write(out.subarray(offset));
      await new Promise((resolve) => setImmediate(resolve));
      if (got.length !== 1 || !got[0]!.equals(data)) t.fail(`${size} bytes at offset ${offset} did not come back as sent`);
      else checked++;
    }
  }
  t.equal(checked, sizes.length * 8, 'every size at every offset was read back as sent');
});

t.test('every frame encodeFrameInto writes is masked, with a fresh key', async (t) => {
  const a = encodeAll([{ opcode: OPCODE_TEXT, data: Buffer.from('same') }]);
  const b = encodeAll([{ opcode: OPCODE_TEXT, data: Buffer.from('same') }]);
  t.equal(a[1]! & 0x80, 0x80, 'the mask bit is set');
  t.not(a.subarray(2, 6).toString('hex'), b.subarray(2, 6).toString('hex'), 'two frames get two keys');
  t.not(a.subarray(6).toString(), 'same', 'the payload is not sent in the clear');
});

t.test('text messages of one read checked for UTF-8 together: the same messages and the same 1007 as checked one by one', async (t) => {
  // Runs of small whole text frames in one read take FrameReader's one-call check (checkTextRun); a
  // run with a message that is not UTF-8 falls back to one check per message. Either way: the messages
  // before the first bad one, then 1007; and the read's bytes as they were.
  const utf8 = fc.string({ unit: 'grapheme', maxLength: 40 }).map((s) => Buffer.from(s));
  const notUtf8 = fc.constantFrom(Buffer.from([0xc3]), Buffer.from([0x61, 0xff, 0x62]), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from([0x80]), Buffer.from([0xe2, 0x82]));
  const frame = fc.oneof(
    { weight: 8, arbitrary: utf8.map((data) => ({ kind: 'text' as const, data })) },
    { weight: 2, arbitrary: notUtf8.map((data) => ({ kind: 'bad' as const, data })) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 20 }).map((a) => ({ kind: 'binary' as const, data: Buffer.from(a) })) },
    { weight: 1, arbitrary: fc.integer({ min: 126, max: 400 }).map((n) => ({ kind: 'text' as const, data: Buffer.alloc(n, 0x61) })) },
    { weight: 1, arbitrary: fc.constant({ kind: 'ping' as const, data: Buffer.from('p') }) },
  );
  fc.assert(
    fc.property(fc.array(frame, { minLength: 1, maxLength: 12 }), fc.integer({ min: 0, max: 3 }), (frames, lead) => {
      const expected: Event[] = [];
      for (const f of frames) {
        if (f.kind === 'bad') {
          expected.push(['violation', 1007]);
          break;
        }
        if (f.kind === 'ping') expected.push(['ping', f.data.toString('hex')]);
        else expected.push(['message', f.data.toString('hex'), f.kind === 'binary']);
      }
      const bytes = Buffer.concat(frames.map((f) => serverFrame(f.kind === 'binary' ? OPCODE_BINARY : f.kind === 'ping' ? OPCODE_PING : OPCODE_TEXT, f.data, true)));
      // Somewhere in a larger buffer, with bytes after the read's end that must not be read.
      const read = Buffer.concat([Buffer.alloc(lead, 0x81), bytes, Buffer.alloc(3, 0x81)]);
      const before = Buffer.from(read);
      const { sink, events } = collector();
      new FrameReader(sink, 1 << 20).push(read.subarray(lead), bytes.length);
      t.same(events, expected);
      t.ok(read.equals(before), 'the read is left as it was');
      return true;
    }),
    { numRuns: 300 },
  );
});

t.test('what the reader refuses, and the close code it gives', async (t) => {
  const cases: Array<[string, Buffer, number, number]> = [
    ['a masked frame', Buffer.from([0x81, 0x81, 1, 2, 3, 4, 0x61]), 1002, 1 << 20],
    ['an RSV bit', Buffer.from([0xc1, 0x01, 0x61]), 1002, 1 << 20],
    ['an unknown data opcode', Buffer.from([0x83, 0x00]), 1002, 1 << 20],
    ['an unknown control opcode', Buffer.from([0x8b, 0x00]), 1002, 1 << 20],
    ['a fragmented ping', Buffer.from([0x09, 0x00]), 1002, 1 << 20],
    ['a control frame over 125 bytes', Buffer.concat([Buffer.from([0x89, 126, 0, 126]), Buffer.alloc(126)]), 1002, 1 << 20],
    ['a continuation with nothing to continue', Buffer.from([0x80, 0x00]), 1002, 1 << 20],
    ['a new message inside a fragmented one', Buffer.from([0x01, 0x01, 0x61, 0x81, 0x01, 0x62]), 1002, 1 << 20],
    ['text that is not UTF-8', Buffer.from([0x81, 0x02, 0xc3, 0x28]), 1007, 1 << 20],
    ['a close reason that is not UTF-8', Buffer.from([0x88, 0x04, 0x03, 0xe8, 0xc3, 0x28]), 1007, 1 << 20],
    ['a one-byte close payload', Buffer.from([0x88, 0x01, 0x03]), 1002, 1 << 20],
    ['close code 1005 on the wire', Buffer.from([0x88, 0x02, 0x03, 0xed]), 1002, 1 << 20],
    ['a message over maxPayload, from its header alone', Buffer.from([0x82, 0x7f, 0, 0, 0, 1, 0, 0, 0, 0]), 1009, 1 << 20],
    ['fragments that add up past maxPayload', Buffer.from([0x02, 0x03, 1, 2, 3, 0x80, 0x03, 4, 5, 6]), 1009, 5],
  ];
  for (const [what, bytes, code, maxPayload] of cases) {
    const { sink, events } = collector();
    const reader = new FrameReader(sink, maxPayload);
    reader.push(bytes);
    t.same(events.at(-1), ['violation', code], `${what}: ${code}`);
    reader.push(serverFrame(OPCODE_TEXT, Buffer.from('after'), true));
    t.equal(events.filter((e) => e[0] === 'message' && e[1] === Buffer.from('after').toString('hex')).length, 0, `${what}: nothing is read after it`);
  }
  const { sink, events } = collector();
  new FrameReader(sink, 10).push(serverFrame(OPCODE_BINARY, Buffer.alloc(10), true));
  t.equal(events[0]?.[0], 'message', 'a message of exactly maxPayload passes');
});

t.test('a frame split over many reads is read once, without holding more than its size', async (t) => {
  const data = Buffer.alloc(3_000_000, 7);
  const frame = serverFrame(OPCODE_BINARY, data, true);
  const { sink, events } = collector();
  const reader = new FrameReader(sink, 4_000_000);
  for (let at = 0; at < frame.length; at += 65_536) reader.push(frame.subarray(at, at + 65_536));
  t.equal(events.length, 1);
  t.equal((events[0] as ['message', string, boolean])[1].length, data.length * 2, 'the whole message, once');
});

t.test('any bytes at all: the reader never throws, and stops at the first violation', async (t) => {
  fc.assert(
    fc.property(fc.array(fc.uint8Array({ maxLength: 300 }), { maxLength: 8 }), fc.integer({ min: 0, max: 400 }), (chunks, maxPayload) => {
      const { sink, events } = collector();
      const reader = new FrameReader(sink, maxPayload);
      for (const chunk of chunks) reader.push(Buffer.from(chunk));
      const ends = events.filter((e) => e[0] === 'violation' || e[0] === 'close');
      t.ok(ends.length <= 1, 'at most one close or violation');
      if (ends.length === 1) t.equal(events.at(-1), ends[0], 'and nothing after it');
      for (const e of events) if (e[0] === 'message') t.ok(e[1].length / 2 <= maxPayload, 'no message over maxPayload');
      return true;
    }),
    { numRuns: 500 },
  );
});
