/** The LevelDB store adapter: reads, writes, atomic batches, ordered scans, expiry, namespaces, persistence. */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { LevelStore } from '../../../src/store/level.ts';
import { putIfAbsent, take, type Store } from '../../../src/store/store.ts';
import { tempDir } from '../../helpers/gateway.ts';

let dir: string;
let store: LevelStore;

before(async () => {
  dir = join(tempDir(), 'store');
  store = new LevelStore(dir);
  await store.open();
});

after(() => store.close());

async function collect(iterable: AsyncIterable<[string, string]>): Promise<[string, string][]> {
  const out: [string, string][] = [];
  for await (const entry of iterable) out.push(entry);
  return out;
}

async function keys(s: Store, options: Parameters<Store['scan']>[0]): Promise<string[]> {
  return (await collect(s.scan(options))).map(([k]) => k);
}

test('get, put, del, getMany', async () => {
  const s = store.namespace('basic');
  assert.equal(await s.get('a'), undefined);
  await s.put('a', 'one');
  await s.put('b', '');
  assert.equal(await s.get('a'), 'one');
  assert.equal(await s.get('b'), '', 'an empty value is a value');
  await s.put('a', 'two', { sync: true });
  assert.equal(await s.get('a'), 'two', 'put overwrites');
  assert.deepEqual(await s.getMany(['b', 'missing', 'a']), ['', undefined, 'two']);
  assert.deepEqual(await s.getMany([]), []);
  await s.del('a');
  await s.del('never-existed');
  assert.equal(await s.get('a'), undefined);
  const unicode = 'ünïcødé ✓ \u{1F600}';
  await s.put('u', unicode);
  assert.equal(await s.get('u'), unicode);
});

test('a batch applies all its operations at once, or none when one is invalid', async () => {
  const s = store.namespace('batch');
  await s.put('gone', 'x');
  await s.batch([
    { type: 'put', key: 'k1', value: 'v1' },
    { type: 'put', key: 'k2', value: 'v2', ttlMs: 60_000 },
    { type: 'del', key: 'gone' },
  ]);
  assert.deepEqual(await s.getMany(['k1', 'k2', 'gone']), ['v1', 'v2', undefined]);

  // A value LevelDB refuses makes the whole batch fail: the put before it must not be applied either.
  await assert.rejects(
    s.batch([
      { type: 'put', key: 'k3', value: 'v3' },
      { type: 'del', key: 'k1' },
      { type: 'put', key: 'k4', value: undefined as unknown as string },
    ]),
  );
  assert.deepEqual(await s.getMany(['k3', 'k1', 'k4']), [undefined, 'v1', undefined]);
  await s.batch([]);
});

test('a write batch filled operation by operation applies nothing until written, and nothing when discarded', async () => {
  const s = store.namespace('chained');
  await s.put('gone', 'x');
  const batch = s.writeBatch();
  batch.put('k1', 'v1');
  batch.put('k2', '');
  batch.del('gone');
  assert.deepEqual(await s.getMany(['k1', 'k2', 'gone']), [undefined, undefined, 'x'], 'nothing before write()');
  await batch.write({ sync: true });
  assert.deepEqual(await s.getMany(['k1', 'k2', 'gone']), ['v1', '', undefined]);
  assert.equal(await store.namespace('other').get('k1'), undefined, 'inside its namespace only');

  const dropped = s.writeBatch();
  dropped.put('k3', 'v3');
  assert.throws(() => dropped.put('k4', undefined as unknown as string), TypeError);
  await dropped.discard();
  assert.equal(await s.get('k3'), undefined);
});

test('scans are ordered, bounded by prefix, gte/lt, reversed and limited', async () => {
  const s = store.namespace('scan');
  const all = ['a', 'b/1', 'b/2', 'b/10', 'b/3', 'ba', 'c'];
  await s.batch([...all].reverse().map((k) => ({ type: 'put' as const, key: k, value: `v:${k}` })));
  assert.deepEqual(await keys(s, {}), ['a', 'b/1', 'b/10', 'b/2', 'b/3', 'ba', 'c'], 'lexicographic order');
  assert.deepEqual(await collect(s.scan({ prefix: 'b/' })), [
    ['b/1', 'v:b/1'],
    ['b/10', 'v:b/10'],
    ['b/2', 'v:b/2'],
    ['b/3', 'v:b/3'],
  ]);
  assert.deepEqual(await keys(s, { prefix: 'b/', reverse: true }), ['b/3', 'b/2', 'b/10', 'b/1']);
  assert.deepEqual(await keys(s, { prefix: 'b/', limit: 2 }), ['b/1', 'b/10']);
  assert.deepEqual(await keys(s, { prefix: 'b/', reverse: true, limit: 1 }), ['b/3']);
  assert.deepEqual(await keys(s, { prefix: 'b/', limit: 0 }), []);
  assert.deepEqual(await keys(s, { gte: 'b/2', lt: 'c' }), ['b/2', 'b/3', 'ba']);
  assert.deepEqual(await keys(s, { prefix: 'b/', gte: 'b/2' }), ['b/2', 'b/3'], 'gte inside the prefix');
  assert.deepEqual(await keys(s, { prefix: 'b/', gte: 'a', lt: 'z' }), ['b/1', 'b/10', 'b/2', 'b/3'], 'bounds never widen the prefix');
  assert.deepEqual(await keys(s, { prefix: 'zz' }), []);
});

test('prefix scans find keys with any character after the prefix (non-ASCII, U+FFFF, emoji), in code point order', async () => {
  const s = store.namespace('unicode');
  const names = ['u/alice', 'u/zoë', 'u/\uffff', 'u/😀', 'u/日本'];
  await s.batch(names.map((k) => ({ type: 'put' as const, key: k, value: k })));
  await s.put('v', 'after');
  assert.deepEqual(await keys(s, { prefix: 'u/' }), ['u/alice', 'u/zoë', 'u/日本', 'u/\uffff', 'u/😀']);
  assert.deepEqual(await keys(s, { prefix: 'u/', reverse: true, limit: 1 }), ['u/😀']);
  assert.deepEqual(await keys(s, { prefix: 'u/', gte: 'u/\uffff' }), ['u/\uffff', 'u/😀']);
  assert.deepEqual(await keys(s, { prefix: 'u/', lt: 'u/😀' }), ['u/alice', 'u/zoë', 'u/日本', 'u/\uffff']);
});

test('entries with a ttl read as absent once expired, are skipped by scans, and swept', async () => {
  const s = store.namespace('ttl');
  await s.put('short', 'x', { ttlMs: 30 });
  await s.put('long', 'y', { ttlMs: 3_600_000 });
  await s.put('forever', 'z');
  await s.put('rewritten', 'old', { ttlMs: 30 });
  await s.put('rewritten', 'new');
  assert.equal(await s.get('short'), 'x', 'readable before it expires');
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(await s.get('short'), undefined);
  assert.deepEqual(await s.getMany(['short', 'long']), [undefined, 'y']);
  assert.deepEqual(await keys(s, {}), ['forever', 'long', 'rewritten']);
  assert.equal(await s.get('rewritten'), 'new', 'a rewrite without ttl clears the expiry');

  const removed = await store.sweepExpired();
  assert.ok(removed >= 1, `swept ${removed}`);
  // The sweeper deleted the expired row itself, not only hid it: the raw database no longer has it.
  const raw = await keys(store, { prefix: 'ttl:' });
  assert.deepEqual(raw, ['ttl:forever', 'ttl:long', 'ttl:rewritten']);
  assert.equal(await s.get('rewritten'), 'new', 'the sweep keeps a key re-written without expiry');

  // Sweeping as if an hour had passed removes the long one too.
  assert.ok((await store.sweepExpired(Date.now() + 3_600_001)) >= 1);
  assert.deepEqual(await keys(store, { prefix: 'ttl:' }), ['ttl:forever', 'ttl:rewritten']);
});

test('namespaces are isolated from each other and from keys that merely share a prefix', async () => {
  const a = store.namespace('ns-a');
  const b = store.namespace('ns-b');
  const aa = store.namespace('ns-aa');
  await a.put('k', 'from a');
  await b.put('k', 'from b');
  await aa.put('k', 'from aa');
  assert.equal(await a.get('k'), 'from a');
  assert.equal(await b.get('k'), 'from b');
  assert.deepEqual(await collect(a.scan({})), [['k', 'from a']], 'a scan sees only its own namespace');
  const nested = a.namespace('inner');
  await nested.put('k', 'deep');
  assert.equal(await nested.get('k'), 'deep');
  assert.equal(await a.get('k'), 'from a');
  assert.deepEqual(await keys(a, { prefix: 'inner' }), ['inner:k'], 'a nested namespace lives inside its parent');
  await a.batch([{ type: 'del', key: 'k' }]);
  assert.equal(await a.get('k'), undefined);
  assert.equal(await b.get('k'), 'from b', 'a batch in one namespace never touches another');
});

test('everything written survives closing and reopening the database', async () => {
  const path = join(tempDir(), 'store');
  const first = new LevelStore(path);
  await first.open();
  const ns = first.namespace('p');
  await ns.put('plain', '1');
  await ns.put('expiring', '2', { ttlMs: 3_600_000 });
  await ns.batch([{ type: 'put', key: 'batched', value: '3' }], { sync: true });
  await first.close();

  const second = new LevelStore(path);
  await second.open();
  try {
    const reopened = second.namespace('p');
    assert.deepEqual(await reopened.getMany(['plain', 'expiring', 'batched']), ['1', '2', '3']);
    assert.equal(await second.sweepExpired(Date.now() + 3_600_001), 1, 'the expiry index survived too');
    assert.equal(await reopened.get('expiring'), undefined);
  } finally {
    await second.close();
  }
});

test('a second process cannot open a data directory in use (LevelDB lock)', async () => {
  const other = new LevelStore(dir);
  await assert.rejects(other.open());
});

test('commitIf writes only when every expectation holds, and serialises concurrent callers', async () => {
  const s = store.namespace('cas');
  assert.equal(await s.commitIf([{ key: 'k', value: undefined }], [{ type: 'put', key: 'k', value: 'first' }]), true);
  assert.equal(await s.commitIf([{ key: 'k', value: undefined }], [{ type: 'put', key: 'k', value: 'second' }]), false, 'the key exists now');
  assert.equal(await s.get('k'), 'first');
  assert.equal(await s.commitIf([{ key: 'k', value: 'first' }, { key: 'other', value: undefined }], [{ type: 'put', key: 'k', value: 'third' }, { type: 'put', key: 'other', value: 'x' }]), true);
  assert.deepEqual(await s.getMany(['k', 'other']), ['third', 'x']);
  assert.equal(await s.commitIf([{ key: 'k', value: 'first' }], [{ type: 'del', key: 'k' }]), false, 'a stale expectation writes nothing');
  assert.equal(await s.get('k'), 'third');

  // Fifty concurrent insert-if-absent calls: exactly one wins.
  const results = await Promise.all(Array.from({ length: 50 }, (_, i) => putIfAbsent(s, 'race', String(i))));
  assert.equal(results.filter(Boolean).length, 1);
  // Fifty concurrent takes of one value: exactly one gets it, and it is gone.
  await s.put('single', 'use');
  const taken = await Promise.all(Array.from({ length: 50 }, () => take(s, 'single')));
  assert.deepEqual(taken.filter((v) => v !== undefined), ['use']);
  assert.equal(await s.get('single'), undefined);
});

test('an expired entry counts as absent for commitIf', async () => {
  const s = store.namespace('cas-ttl');
  await s.put('lease', 'a', { ttlMs: 30 });
  assert.equal(await s.commitIf([{ key: 'lease', value: undefined }], [{ type: 'put', key: 'lease', value: 'b' }]), false);
  await new Promise((r) => setTimeout(r, 60));
  assert.equal(await s.commitIf([{ key: 'lease', value: undefined }], [{ type: 'put', key: 'lease', value: 'b' }]), true);
  assert.equal(await s.get('lease'), 'b');
});

test('notices reach the subscribers of their namespace and topic only', async () => {
  const a = store.namespace('na');
  const b = store.namespace('nb');
  const got: (string | null)[] = [];
  const stop = a.notices.subscribe('tokens', (m) => got.push(m));
  a.notices.publish('tokens', 'one');
  b.notices.publish('tokens', 'other namespace');
  a.notices.publish('credentials', 'other topic');
  stop();
  a.notices.publish('tokens', 'after unsubscribe');
  assert.deepEqual(got, ['one']);
});
