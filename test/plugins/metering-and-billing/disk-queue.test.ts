/**
 * The on-disk queue as several processes sharing one store use it (two queues with their own owners on
 * one real LevelDB store stand for two processes): claims never hand the same entry to two owners, every
 * entry is claimed once, a claim whose owner stopped renewing it is taken over once its lease has run
 * out (and not before), and a claim taken over cannot be completed by its former owner.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { DiskQueue } from '../../../plugins/metering-and-billing/disk-queue.ts';
import { LevelStore } from '../../../src/store/level.ts';
import { tempDir } from '../../helpers/gateway.ts';

let store: LevelStore;
before(async () => {
  store = new LevelStore(join(tempDir(), 'store'));
  await store.open();
});
after(() => store.close());

test('two owners claiming concurrently take every entry exactly once', async () => {
  const space = store.namespace('claims');
  const one = new DiskQueue(space, 'shared');
  const two = new DiskQueue(space, 'shared');
  const events = [...Array(500)].map((_, i) => JSON.stringify({ id: `e${i}` }));
  for (let i = 0; i < events.length; i += 50) await (i % 100 ? one : two).append(events.slice(i, i + 50));
  assert.deepEqual(await one.count(), { entries: 500, bytes: events.reduce((n, e) => n + e.length, 0) });
  const taken: string[][] = [[], []];
  const drain = async (queue: DiskQueue, into: string[]) => {
    for (;;) {
      const claim = await queue.claim(7, Date.now() + 60_000, { olderThan: Date.now() });
      if (!claim) return;
      into.push(...claim.state.events);
      assert.ok(await queue.complete(claim));
    }
  };
  await Promise.all([drain(one, taken[0]), drain(two, taken[1]), drain(one, taken[0]), drain(two, taken[1])]);
  const all = [...taken[0], ...taken[1]];
  assert.equal(all.length, 500);
  assert.equal(new Set(all).size, 500);
  assert.ok(taken[0].length > 0 && taken[1].length > 0, 'both owners took part');
  assert.equal((await one.count()).entries, 0);
});

test('a batch is not claimed before it is full or its oldest entry waited long enough', async () => {
  const queue = new DiskQueue(store.namespace('ready'), 'q');
  await queue.append(['{"id":"a"}', '{"id":"b"}'], 1_000);
  assert.equal(await queue.claim(3, 60_000, { olderThan: 999 }), undefined);
  assert.equal((await queue.claim(3, 60_000, { olderThan: 1_000 }))?.state.events.length, 2);
});

test('an expired lease is taken over by another owner, and the former owner can no longer settle it', async () => {
  const space = store.namespace('leases');
  const dead = new DiskQueue(space, 'q');
  const alive = new DiskQueue(space, 'q');
  await dead.append(['{"id":"x"}']);
  const now = Date.now();
  const claim = (await dead.claim(10, now + 1_000, { olderThan: now }))!;
  assert.deepEqual(await alive.takeOverExpired(now + 60_000, now), [], 'not while the lease holds');
  const [taken] = await alive.takeOverExpired(now + 60_000, now + 1_001);
  assert.equal(taken.state.owner, alive.owner);
  assert.deepEqual(taken.state.events, ['{"id":"x"}']);
  assert.equal(await dead.complete(claim), false);
  assert.equal(await dead.update(claim, { attempts: 1 }), undefined);
  assert.ok(await alive.complete(taken));
});

test('dropping the oldest entries keeps the newest', async () => {
  const queue = new DiskQueue(store.namespace('drop'), 'q');
  await queue.append(['1', '2'], 1_000);
  await queue.append(['3', '4', '5'], 2_000);
  assert.equal(await queue.dropOldest(3), 3);
  const claim = (await queue.claim(10, Date.now() + 1_000, { olderThan: Date.now() }))!;
  assert.deepEqual(claim.state.events, ['4', '5']);
});
