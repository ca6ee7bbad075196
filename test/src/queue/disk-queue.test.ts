/**
 * The on-disk queue as several processes sharing one store use it (two queues with their own owners on
 * one real LevelDB store stand for two processes): claims never hand the same event to two owners, every
 * event is claimed once, batches follow max_batch_size over chunks of any size, a claim whose owner
 * stopped renewing it is taken over once its lease has run out (and not before) and cannot be settled
 * by its former owner any more, dropping the oldest events splits a chunk when it must, a claim split
 * into parts (a refused batch) replaces it in one step, and re-delivered events go ahead of the rest.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { DiskQueue, eventsIn } from '../../../src/queue/disk-queue.ts';
import { LevelStore } from '../../../src/store/level.ts';
import { tempDir } from '../../helpers/gateway.ts';

let store: LevelStore;
before(async () => {
  store = new LevelStore(join(tempDir(), 'store'));
  await store.open();
});
after(() => store.close());

const lines = (text: string) => text.split('\n');

test('two owners claiming concurrently take every event exactly once, in batches of at most max', async () => {
  const space = store.namespace('claims');
  const one = new DiskQueue(space, 'shared');
  const two = new DiskQueue(space, 'shared');
  const events = [...Array(500)].map((_, i) => JSON.stringify({ id: `e${i}` }));
  for (let i = 0; i < events.length; i += 50) await (i % 100 ? one : two).append(events.slice(i, i + 50), 7);
  // Each append of 50 makes 8 chunks (7 × 7 + 1): 42 line feeds between its events.
  assert.deepEqual(await one.count(), { events: 500, bytes: events.reduce((n, e) => n + e.length, 0) + 10 * 42 });
  const taken: string[][] = [[], []];
  const drain = async (queue: DiskQueue, into: string[]) => {
    for (;;) {
      const claim = await queue.claim(20, Date.now() + 60_000, { olderThan: Date.now() });
      if (!claim) return;
      assert.ok(claim.state.count <= 20 && claim.state.count === eventsIn(claim.events));
      into.push(...lines(claim.events));
      assert.ok(await queue.complete(claim));
    }
  };
  await Promise.all([drain(one, taken[0]), drain(two, taken[1]), drain(one, taken[0]), drain(two, taken[1])]);
  const all = [...taken[0], ...taken[1]];
  assert.equal(all.length, 500);
  assert.equal(new Set(all).size, 500);
  assert.ok(taken[0].length > 0 && taken[1].length > 0, 'both owners took part');
  assert.equal((await one.count()).events, 0);
});

test('a batch is not claimed before it is full or its oldest event waited long enough', async () => {
  const queue = new DiskQueue(store.namespace('ready'), 'q');
  await queue.append(['{"id":"a"}', '{"id":"b"}'], 10, 1_000);
  assert.equal(await queue.claim(3, 60_000, { olderThan: 999 }), undefined);
  const claim = (await queue.claim(3, 60_000, { olderThan: 1_000 }))!;
  assert.deepEqual(lines(claim.events), ['{"id":"a"}', '{"id":"b"}']);
});

test('an expired lease is taken over by another owner, and the former owner can no longer settle it', async () => {
  const space = store.namespace('leases');
  const dead = new DiskQueue(space, 'q');
  const alive = new DiskQueue(space, 'q');
  await dead.append(['{"id":"x"}'], 10);
  const now = Date.now();
  const claim = (await dead.claim(10, now + 1_000, { olderThan: now }))!;
  assert.deepEqual(await alive.takeOverExpired(now + 60_000, now), [], 'not while the lease holds');
  const [taken] = await alive.takeOverExpired(now + 60_000, now + 1_001);
  assert.equal(taken.state.owner, alive.owner);
  assert.equal(taken.events, '{"id":"x"}');
  assert.equal(await dead.complete(claim), false);
  assert.equal(await dead.update(claim, { attempts: 1 }), undefined);
  assert.ok(await alive.complete(taken));
  assert.deepEqual(await alive.takeOverExpired(Date.now() + 60_000, Date.now() + 120_000), []);
});

test('dropping the oldest events keeps the newest, splitting a chunk', async () => {
  const queue = new DiskQueue(store.namespace('drop'), 'q');
  await queue.append(['1', '2'], 10, 1_000);
  await queue.append(['3', '4', '5'], 10, 2_000);
  assert.equal(await queue.dropOldest(3), 3);
  assert.deepEqual(await queue.count(), { events: 2, bytes: 3 });
  const claim = (await queue.claim(10, Date.now() + 1_000, { olderThan: Date.now() }))!;
  assert.deepEqual(lines(claim.events), ['4', '5']);
});

test('a claim split into parts: every event in one part, the first attempt kept, the former claim settled', async () => {
  const space = store.namespace('split');
  const splitter = new DiskQueue(space, 'q');
  const other = new DiskQueue(space, 'q');
  await splitter.append(['a', 'b', 'c'], 10, 1_000);
  const now = Date.now();
  const claim = (await splitter.claim(10, now + 60_000, { olderThan: now }, 5_000))!;
  const parts = (await splitter.split(claim, [['a', 'c'], ['b']], now + 1_000, 6_000))!;
  assert.deepEqual(parts.map((p) => [p.events, p.state.count, p.state.first_try]), [['a\nc', 2, 5_000], ['b', 1, 5_000]]);
  assert.equal(await splitter.complete(claim), false, 'the split claim is gone');
  assert.equal(await splitter.split(claim, [['a']], now + 1_000), undefined);
  // The parts are claims like any other: taken over once their lease runs out.
  const taken = await other.takeOverExpired(now + 60_000, now + 1_001);
  assert.deepEqual(taken.map((p) => p.events).sort(), ['a\nc', 'b']);
  for (const part of taken) assert.ok(await other.complete(part));
});

test('a re-queued chunk is claimed before every queued event', async () => {
  const space = store.namespace('head');
  const queue = new DiskQueue(space, 'q');
  await queue.append(['1', '2'], 10, 1_000);
  await space.batch([queue.headChunk('0')]);
  const claim = (await queue.claim(10, Date.now() + 1_000, { olderThan: Date.now() }))!;
  assert.deepEqual(lines(claim.events), ['0', '1', '2']);
});
