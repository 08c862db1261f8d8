// The shared store's decoded records (the memo each worker keeps): two stores on one LMDB environment
// stand for two workers. A record one of them decoded is served again without reading its entry while
// no entry changed, and never once another store replaced, deleted, invalidated or evicted it, or once
// it expired.
import t, { type Test } from 'tap';
import { SharedCacheStore } from '../../src/cache/shared-store.js';
import { StoredResponse, type CacheRecord } from '../../src/cache/record.js';
import { KEY, NO_EVENTS as events, storedResponse as response, storeDir } from '../helpers/shared-store-fixtures.js';

const dir = storeDir(t, 'memo');

function bodyOf(record: CacheRecord | undefined): string | undefined {
  return record instanceof StoredResponse ? record.body.toString() : undefined;
}

/** A writer and a reader on the same environment, each with its own memo. */
function stores(t: Test, owner: string, maxBytes = 1 << 26): { writer: SharedCacheStore; reader: SharedCacheStore } {
  const writer = new SharedCacheStore(dir, owner, maxBytes, events);
  const reader = new SharedCacheStore(dir, owner, maxBytes, events);
  t.teardown(async () => {
    await reader.close();
    await writer.close();
  });
  return { writer, reader };
}

t.test('a decoded record is served again while nothing changed, and after a change to another entry', async (t) => {
  const { writer, reader } = stores(t, 'unchanged');
  writer.set(KEY, response('first'), 60_000);
  const decoded = reader.get(KEY);
  t.equal(bodyOf(decoded), 'first', 'the reader decodes the entry');
  t.equal(reader.get(KEY), decoded, 'and serves the same record next time');
  writer.set('http://gw/items/2 /items/{}', response('other', 'http://gw/items/2 /items/{}'), 60_000);
  t.equal(reader.get(KEY), decoded, 'another entry stored: this one is checked and still the same record');
  t.equal(reader.get(KEY), decoded);
});

t.test('another store replaces the entry: the reader serves the new one', async (t) => {
  const { writer, reader } = stores(t, 'replaced');
  writer.set(KEY, response('first'), 60_000);
  t.equal(bodyOf(reader.get(KEY)), 'first');
  writer.set(KEY, response('second'), 60_000);
  t.equal(bodyOf(reader.get(KEY)), 'second');
  t.equal(bodyOf(reader.get(KEY)), 'second');
});

t.test('another store deletes the entry, or invalidates its URL: the reader has none', async (t) => {
  const { writer, reader } = stores(t, 'deleted');
  writer.set(KEY, response('first'), 60_000);
  t.equal(bodyOf(reader.get(KEY)), 'first');
  writer.delete(KEY);
  t.equal(reader.get(KEY), undefined, 'deleted');
  writer.set(KEY, response('again'), 60_000);
  t.equal(bodyOf(reader.get(KEY)), 'again');
  t.equal(writer.deletePrefix('http://gw/items/1 '), 1);
  t.equal(reader.get(KEY), undefined, 'invalidated');
});

t.test('another store evicts the entry to make room: the reader has none', async (t) => {
  const { writer, reader } = stores(t, 'evicted', 4096);
  writer.set(KEY, response('first'), 60_000);
  t.equal(bodyOf(reader.get(KEY)), 'first');
  const big = 'x'.repeat(3000);
  writer.set('http://gw/items/2 /items/{}', response(big, 'http://gw/items/2 /items/{}'), 60_000);
  t.equal(reader.get(KEY), undefined, 'the oldest entry went for the new one');
});

t.test('an entry expires in the reader\'s memo too', async (t) => {
  const { writer, reader } = stores(t, 'expired');
  writer.set(KEY, response('short'), 80);
  t.equal(bodyOf(reader.get(KEY)), 'short');
  await new Promise((resolve) => setTimeout(resolve, 120));
  t.equal(reader.get(KEY), undefined);
});
