/**
 * The store contract (src/store/store.ts), one body for every adapter: reads, writes, atomic batches,
 * ordered scans, expiry, namespaces, persistence, commitIf and notices. An adapter whose data can be
 * opened by several instances at once (PostgreSQL nodes, worker processes over IPC) also runs the
 * races and the notices across two instances, as two processes would.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { registerStoreProcedures } from '../../../src/store/procedures.ts';
import { putIfAbsent, take, type Store, type StoreAdapter } from '../../../src/store/store.ts';
import { waitFor } from '../../helpers/support.ts';

/** A place where data lives (a LevelDB directory, a PostgreSQL schema); adapters open on it. */
export interface StoreLocation {
  open(): Promise<StoreAdapter>;
}

export interface ContractSubject {
  name: string;
  /** A fresh, empty location. */
  location(): Promise<StoreLocation>;
  /** Several adapters may be open on one location at once (several processes or nodes). */
  shared: boolean;
  skip?: string;
  /** Runs once after every test of the suite. */
  teardown?(): Promise<void>;
}

async function collect(iterable: AsyncIterable<[string, string]>): Promise<[string, string][]> {
  const out: [string, string][] = [];
  for await (const entry of iterable) out.push(entry);
  return out;
}

async function keys(s: Store, options: Parameters<Store['scan']>[0]): Promise<string[]> {
  return (await collect(s.scan(options))).map(([k]) => k);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/**
 * A ttl that a loaded machine cannot outlast between a write and the next read (at 30 ms, CI once saw an
 * entry expire before the read meant to find it), and short enough to wait out.
 */
const SHORT_TTL_MS = 500;

/** A store procedure for the contract: how many keys below a prefix, and the sum of their values. */
registerStoreProcedures([
  {
    name: 'contract',
    storeProcedures: {
      sum: async (store, [prefix]) => {
        let keys = 0;
        let total = 0;
        for await (const [, value] of store.scan({ prefix: prefix as string })) {
          keys++;
          total += Number(value);
        }
        return { keys, total };
      },
    },
  },
]);

export function storeContract(subject: ContractSubject): void {
  describe(`store contract: ${subject.name}`, { skip: subject.skip }, () => {
    let location: StoreLocation;
    let store: StoreAdapter;
    /** A second instance on the same data (another process or node), where the adapter allows it. */
    let peer: StoreAdapter;
    const opened: StoreAdapter[] = [];
    const open = async (at: StoreLocation) => {
      const s = await at.open();
      opened.push(s);
      return s;
    };

    before(async () => {
      location = await subject.location();
      store = await open(location);
      peer = subject.shared ? await open(location) : store;
    });

    after(async () => {
      for (const s of opened) await s.close().catch(() => undefined);
      await subject.teardown?.();
    });

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
      assert.equal(await peer.namespace('basic').get('u'), unicode, 'another instance reads what this one wrote');
    });

    test('any string is a key or a value: U+0000, U+0001 and the like come back as written, in order', async () => {
      const s = store.namespace('control');
      const odd = ['a\u0000', 'a\u0000\u0000', 'a\u0001', 'a\u0001\u0002', 'a\u0002', 'a', 'a\u0000b'];
      await s.batch(odd.map((k, i) => ({ type: 'put' as const, key: k, value: `v${i}\u0000\u0001x` })));
      assert.deepEqual(await keys(s, {}), ['a', 'a\u0000', 'a\u0000\u0000', 'a\u0000b', 'a\u0001', 'a\u0001\u0002', 'a\u0002']);
      assert.equal(await s.get('a\u0001'), 'v2\u0000\u0001x');
      assert.deepEqual(await keys(s, { prefix: 'a\u0000' }), ['a\u0000', 'a\u0000\u0000', 'a\u0000b']);
      assert.deepEqual(await keys(s, { gte: 'a\u0000\u0001', lt: 'a\u0001\u0003' }), ['a\u0000b', 'a\u0001', 'a\u0001\u0002']);
      assert.equal(await s.commitIf([{ key: 'a\u0001', value: 'v2\u0000\u0001x' }], [{ type: 'del', key: 'a\u0001' }]), true);
      assert.equal(await s.get('a\u0001'), undefined);
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
      await s.batch([
        { type: 'put', key: 'twice', value: 'first' },
        { type: 'del', key: 'twice' },
        { type: 'put', key: 'twice', value: 'last' },
      ]);
      assert.equal(await s.get('twice'), 'last', 'operations on one key apply in order');

      // A value the store refuses makes the whole batch fail: the put before it must not be applied either.
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

    test('a large write batch is written whole', async () => {
      const s = store.namespace('large');
      const batch = s.writeBatch();
      for (let i = 0; i < 20_000; i++) batch.put(`e/${String(i).padStart(6, '0')}`, JSON.stringify({ i, text: 'x'.repeat(100) }));
      await batch.write({ sync: true });
      const all = await collect(peer.namespace('large').scan({ prefix: 'e/' }));
      assert.equal(all.length, 20_000);
      assert.equal(JSON.parse(all[19_999][1]).i, 19_999);
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

    test('scans longer than one read page see every key once, forwards and backwards', async () => {
      const s = store.namespace('pages');
      const names = Array.from({ length: 3000 }, (_, i) => `k/${String(i).padStart(5, '0')}`);
      await s.batch(names.map((k) => ({ type: 'put' as const, key: k, value: k })));
      assert.deepEqual(await keys(s, { prefix: 'k/' }), names);
      assert.deepEqual(await keys(s, { prefix: 'k/', reverse: true }), [...names].reverse());
      assert.deepEqual(await keys(s, { prefix: 'k/', gte: 'k/01000', limit: 1500 }), names.slice(1000, 2500));
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
      await s.put('short', 'x', { ttlMs: SHORT_TTL_MS });
      await s.put('long', 'y', { ttlMs: 3_600_000 });
      await s.put('forever', 'z');
      await s.put('rewritten', 'old', { ttlMs: SHORT_TTL_MS });
      await s.put('rewritten', 'new');
      assert.equal(await s.get('short'), 'x', 'readable before it expires');
      await sleep(2 * SHORT_TTL_MS);
      assert.equal(await s.get('short'), undefined);
      assert.deepEqual(await s.getMany(['short', 'long']), [undefined, 'y']);
      assert.deepEqual(await keys(s, {}), ['forever', 'long', 'rewritten']);
      assert.equal(await s.get('rewritten'), 'new', 'a rewrite without ttl clears the expiry');

      const removed = await store.sweepExpired();
      assert.ok(removed >= 1, `swept ${removed}`);
      assert.equal(await s.get('rewritten'), 'new', 'the sweep keeps a key re-written without expiry');
      // Sweeping as if an hour had passed removes the long one too.
      assert.ok((await store.sweepExpired(Date.now() + 3_600_001)) >= 1);
      await s.put('long', 'again');
      assert.equal(await s.get('long'), 'again', 'a swept key can be written again');
      assert.deepEqual(await keys(s, {}), ['forever', 'long', 'rewritten']);
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

    test('everything written survives closing and reopening the store', async () => {
      const place = await subject.location();
      const first = await place.open();
      const ns = first.namespace('p');
      await ns.put('plain', '1');
      await ns.put('expiring', '2', { ttlMs: 3_600_000 });
      await ns.batch([{ type: 'put', key: 'batched', value: '3' }], { sync: true });
      await first.close();

      const second = await open(place);
      const reopened = second.namespace('p');
      assert.deepEqual(await reopened.getMany(['plain', 'expiring', 'batched']), ['1', '2', '3']);
      assert.equal(await second.sweepExpired(Date.now() + 3_600_001), 1, 'the expiry survived too');
      assert.equal(await reopened.get('expiring'), undefined);
    });

    test('commitIf writes only when every expectation holds, and serialises concurrent callers of every instance', async () => {
      const s = store.namespace('cas');
      const p = peer.namespace('cas');
      assert.equal(await s.commitIf([{ key: 'k', value: undefined }], [{ type: 'put', key: 'k', value: 'first' }]), true);
      assert.equal(await p.commitIf([{ key: 'k', value: undefined }], [{ type: 'put', key: 'k', value: 'second' }]), false, 'the key exists now');
      assert.equal(await s.get('k'), 'first');
      assert.equal(await p.commitIf([{ key: 'k', value: 'first' }, { key: 'other', value: undefined }], [{ type: 'put', key: 'k', value: 'third' }, { type: 'put', key: 'other', value: 'x' }]), true);
      assert.deepEqual(await s.getMany(['k', 'other']), ['third', 'x']);
      assert.equal(await s.commitIf([{ key: 'k', value: 'first' }], [{ type: 'del', key: 'k' }]), false, 'a stale expectation writes nothing');
      assert.equal(await s.get('k'), 'third');
      assert.equal(await s.commitIf([], [{ type: 'put', key: 'free', value: 'y' }]), true, 'no expectation: a plain atomic write');

      // Fifty concurrent insert-if-absent calls, half through each instance: exactly one wins.
      const either = (i: number) => (i % 2 === 0 ? s : p);
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => putIfAbsent(either(i), 'race', String(i))));
      assert.equal(results.filter(Boolean).length, 1);
      // Fifty concurrent takes of one value: exactly one gets it, and it is gone.
      await s.put('single', 'use');
      const taken = await Promise.all(Array.from({ length: 50 }, (_, i) => take(either(i), 'single')));
      assert.deepEqual(taken.filter((v) => v !== undefined), ['use']);
      assert.equal(await p.get('single'), undefined);
      // A counter incremented 40 times by compare-and-set from both instances ends at 40: no update is lost.
      await s.put('counter', '0');
      await Promise.all(
        Array.from({ length: 40 }, async (_, i) => {
          const self = either(i);
          for (;;) {
            const current = (await self.get('counter'))!;
            if (await self.commitIf([{ key: 'counter', value: current }], [{ type: 'put', key: 'counter', value: String(Number(current) + 1) }])) return;
          }
        }),
      );
      assert.equal(await s.get('counter'), '40');
    });

    test('an expired entry counts as absent for commitIf', async () => {
      const s = store.namespace('cas-ttl');
      await s.put('lease', 'a', { ttlMs: SHORT_TTL_MS });
      assert.equal(await s.commitIf([{ key: 'lease', value: undefined }], [{ type: 'put', key: 'lease', value: 'b' }]), false);
      await sleep(2 * SHORT_TTL_MS);
      assert.equal(await peer.namespace('cas-ttl').commitIf([{ key: 'lease', value: undefined }], [{ type: 'put', key: 'lease', value: 'b', ttlMs: 60_000 }]), true);
      assert.equal(await s.get('lease'), 'b');
    });

    test('a fenced write batch applies whole while its expectations hold, and nothing once another instance changed them', async () => {
      const s = store.namespace('fenced');
      const p = peer.namespace('fenced');
      await s.put('lease', 'term-1');
      await s.put('gone', 'x');
      const kept = s.writeBatch();
      kept.put('a', '1');
      kept.put('short', 'y', { ttlMs: SHORT_TTL_MS });
      kept.del('gone');
      assert.equal(await kept.writeIf([{ key: 'lease', value: 'term-1' }, { key: 'free', value: undefined }], { sync: true }), true);
      assert.deepEqual(await p.getMany(['a', 'short', 'gone']), ['1', 'y', undefined]);
      assert.equal(await store.namespace('other').get('a'), undefined, 'inside its namespace only');

      // The lease passes on through the other instance: a batch made under the old value writes nothing.
      assert.equal(await p.commitIf([{ key: 'lease', value: 'term-1' }], [{ type: 'put', key: 'lease', value: 'term-2' }]), true);
      const late = s.writeBatch();
      late.put('b', '2');
      late.del('a');
      assert.equal(await late.writeIf([{ key: 'lease', value: 'term-1' }], { sync: true }), false);
      assert.deepEqual(await p.getMany(['a', 'b']), ['1', undefined]);
      assert.throws(() => late.put('c', '3'), 'the batch is spent either way');

      await sleep(2 * SHORT_TTL_MS);
      assert.equal(await s.get('short'), undefined, 'a write batch entry with a ttl expires');
    });

    test('the sweep keeps an entry that commitIf renewed while the sweep ran', async () => {
      const s = store.namespace('sweep-race');
      await s.put('lease', 'old', { ttlMs: 1 });
      await sleep(5);
      // Many entries expiring after the lease, so the sweep is still at work when the renewal arrives.
      await s.batch(Array.from({ length: 5_000 }, (_, i) => ({ type: 'put' as const, key: `filler/${i}`, value: 'x', ttlMs: 10 })));
      await sleep(20);
      const swept = store.sweepExpired();
      await sleep(2);
      const renewed = peer.namespace('sweep-race').commitIf([{ key: 'lease', value: undefined }], [{ type: 'put', key: 'lease', value: 'new', ttlMs: 60_000 }]);
      assert.equal(await renewed, true);
      await swept;
      assert.equal(await s.get('lease'), 'new');
    });

    test('nearData runs a registered procedure on the caller\'s namespace and answers its JSON result; an unknown one fails', async () => {
      const s = store.namespace('procedures');
      await s.batch([
        { type: 'put', key: 'r/1', value: '2' },
        { type: 'put', key: 'r/2', value: '3' },
      ]);
      await store.namespace('elsewhere').put('r/3', '100');
      assert.deepEqual(await s.nearData('contract.sum', ['r/']), { keys: 2, total: 5 });
      assert.deepEqual(await peer.namespace('procedures').nearData('contract.sum', ['r/']), { keys: 2, total: 5 }, 'every instance reaches it');
      await assert.rejects(s.nearData('contract.missing', []), /unknown store procedure contract\.missing/);
    });

    test('notices reach the subscribers of their namespace and topic only, in every instance', async () => {
      const a = store.namespace('na');
      const b = store.namespace('nb');
      const got: (string | null)[] = [];
      const there: (string | null)[] = [];
      const stop = a.notices.subscribe('tokens', (m) => got.push(m));
      const stopThere = peer.namespace('na').notices.subscribe('tokens', (m) => there.push(m));
      a.notices.publish('tokens', 'one');
      b.notices.publish('tokens', 'other namespace');
      a.notices.publish('credentials', 'other topic');
      peer.namespace('na').notices.publish('tokens', 'from the peer');
      await waitFor(() => got.length >= 2 && there.length >= 2, 'notices to arrive');
      stop();
      a.notices.publish('tokens', 'after unsubscribe');
      peer.namespace('na').notices.publish('tokens', 'last');
      await waitFor(() => there.length >= 4, 'the last notices');
      // Each instance hears its own notices at once and the other's a moment later: order between them varies.
      assert.deepEqual(got.sort(), ['from the peer', 'one']);
      assert.deepEqual(there.sort(), ['after unsubscribe', 'from the peer', 'last', 'one']);
      stopThere();
    });
  });
}
