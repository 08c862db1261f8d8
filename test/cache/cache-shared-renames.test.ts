// A worker's LMDB environment has 256 named databases (lmdb-env.ts MAX_DATABASES) and a cache takes six.
// A reload that renames a cache opens the new name's databases; the old name's must be closed once
// the last store of that name in the worker closes, or after about 40 renames every further open fails
// with MDB_DBS_FULL (a gateway then refused every reload until restarted). Closing a name's handle frees
// its slot for the next database opened, so a retired store must never touch its databases again:
// it answers as an empty cache.
import t from 'tap';
import { SharedCacheStore } from '../../src/cache/shared-store.js';
import { StoredResponse } from '../../src/cache/record.js';
import { MAX_DATABASES, DATABASES_PER_CACHE } from '../../src/cache/lmdb-env.js';
import { KEY, NO_EVENTS as events, storedResponse as response, storeDir } from '../helpers/shared-store-fixtures.js';

const dir = storeDir(t, 'renames');

/** A store of `owner` on the test's environment, as a worker's cache opens it. */
function open(owner: string): SharedCacheStore {
  return new SharedCacheStore(dir, owner, 1 << 24, events);
}

function bodyOf(store: SharedCacheStore): string | undefined {
  const record = store.get(KEY);
  return record instanceof StoredResponse ? record.body.toString() : undefined;
}

// Another cache of the worker keeps the environment open throughout, as in a gateway with two caches.
const keeper = open('keeper');
t.teardown(() => keeper.close());

t.test('a cache renamed far more often than the environment has database slots keeps working', async (t) => {
  const renames = Math.ceil((MAX_DATABASES / DATABASES_PER_CACHE) * 3);
  let previous: SharedCacheStore | null = null;
  const failures: string[] = [];
  for (let i = 0; i < renames; i++) {
    try {
      const store = open(`renamed-${i}`);
      store.set(KEY, response(`body ${i}`), 60_000);
      if (bodyOf(store) !== `body ${i}`) failures.push(`rename ${i}: its own entry not read back`);
      // The new cache is open before the old one closes, as a reload does it.
      await previous?.close();
      previous = store;
    } catch (err) {
      failures.push(`rename ${i}: ${(err as Error).message}`);
      break;
    }
  }
  await previous?.close();
  t.same(failures, [], `${renames} renames, each cache stored and read its entry`);
  keeper.set(KEY, response('kept'), 60_000);
  t.equal(bodyOf(keeper), 'kept', 'the other cache of the environment is unaffected');
});

t.test('two stores of one name: closing one leaves the other working', async (t) => {
  const [first, second] = [open('twice'), open('twice')];
  first.set(KEY, response('one'), 60_000);
  await first.close();
  t.equal(bodyOf(second), 'one', 'the entry the closed store wrote is read by the open one');
  second.set(KEY, response('two'), 60_000);
  t.equal(bodyOf(second), 'two', 'and it still writes');
  await second.close();
});

t.test('a retired store whose databases were closed answers as an empty cache and writes nowhere', async (t) => {
  // Retired twice over: `old` closes while `current` (same name) is open, then `current` closes too,
  // which closes the name's databases; `old` may still be finishing a request after that.
  const [old, current] = [open('retired'), open('retired')];
  current.set(KEY, response('before'), 60_000);
  await old.close();
  t.equal(bodyOf(old), 'before', 'closed while another store of its name is open: it still reads');
  await current.close();
  // Whatever opens next may take the freed slots.
  const next = open('next-after-retired');
  t.teardown(() => next.close());
  t.equal(old.get(KEY), undefined, 'get: a miss');
  t.equal(old.setAndUnlock(KEY, response('late'), 60_000, null), false, 'a late answer is not stored');
  t.doesNotThrow(() => old.set(KEY, response('late'), 60_000));
  t.equal(old.tryLock(KEY, 'token', 1000), true, 'a lock is granted (the request goes upstream as a lead)');
  t.equal(old.locked(KEY), false);
  t.doesNotThrow(() => old.unlock(KEY, 'token'));
  t.doesNotThrow(() => old.delete(KEY));
  t.equal(old.deletePrefix('http://gw/items/1'), 0);
  t.equal(old.generation('http://gw/items/1'), 0);
  t.equal(old.count, 0);
  t.equal(next.get(KEY), undefined, 'nothing the retired store did reached the cache opened after it');
  t.equal(next.count, 0);
  t.equal(next.locked(KEY), false);
  next.set(KEY, response('next'), 60_000);
  t.equal(bodyOf(next), 'next', 'which works');
});
