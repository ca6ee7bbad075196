/**
 * Durability and exactly-once under a crash: concurrent producers post batches
 * of events with unique (source, id); the gateway process is SIGKILLed in the middle of ingestion and
 * restarted on the same data directory; producers re-send everything that was not acknowledged, plus some
 * acknowledged batches (a producer that lost the answer does exactly that). Then a count meter and a sum
 * meter must equal the exact totals, and every event must be stored exactly once.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { spawnGateway } from '../../helpers/gateway.ts';
import { crash, event, MeteringApi, meteringConfig, sleep, totalOf, type Reply } from './catalogue-support.ts';

const TYPE = 'crash';
const config = meteringConfig({
  meters: [
    { key: 'crash_count', name: 'Crash count', event_type: TYPE, aggregation: 'count' },
    { key: 'crash_sum', name: 'Crash sum', event_type: TYPE, aggregation: 'sum', value_property: '$.value' },
  ],
});

const PRODUCERS = 4;
const BATCHES_PER_PRODUCER = 25;
const EVENTS_PER_BATCH = 40;
/** Acknowledged batches after which the gateway is killed (of PRODUCERS * BATCHES_PER_PRODUCER). */
const KILL_AFTER_ACKS = 24;

interface Batch {
  events: Record<string, any>[];
  acknowledged: boolean;
}

/** Deterministic, distinct batches: producer p's event i of batch b has id `p-b-i` and a value 1..997. */
function makeBatches(): Batch[][] {
  return Array.from({ length: PRODUCERS }, (_, p) =>
    Array.from({ length: BATCHES_PER_PRODUCER }, (_, b) => ({
      acknowledged: false,
      events: Array.from({ length: EVENTS_PER_BATCH }, (_, i) =>
        event({
          id: `${p}-${b}-${i}`,
          source: `producer-${p}`,
          type: TYPE,
          subject: `customer-${i % 7}`,
          time: new Date(Date.now() - (b * EVENTS_PER_BATCH + i) * 1000).toISOString(),
          data: { value: ((p * 7919 + b * 104_729 + i * 31) % 997) + 1 },
        }),
      ),
    })),
  );
}

/** Posts a batch; true when acknowledged (202). Transport errors (the process died) are not acknowledgements. */
async function post(api: MeteringApi, batch: Batch): Promise<boolean> {
  let res: Reply;
  try {
    res = await api.ingest(batch.events);
  } catch {
    return false;
  }
  if (res.status === 503) return false;
  assert.equal(res.status, 202, `ingest answered ${res.status}: ${res.text}`);
  return true;
}

/** Re-sends until acknowledged, honouring 503 + Retry-After (the queue-full answer). */
async function postUntilAcknowledged(api: MeteringApi, batch: Batch): Promise<void> {
  for (let attempt = 0; attempt < 50; attempt++) {
    if (await post(api, batch)) {
      batch.acknowledged = true;
      return;
    }
    await sleep(100);
  }
  assert.fail('a batch was never acknowledged after the restart');
}

const cleanups: (() => Promise<unknown>)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
});

test('kill -9 during concurrent ingestion loses no acknowledged event and counts each event once', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tollgate-crash-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));

  const first = await spawnGateway(config, { dataDir });
  cleanups.push(() => crash(first));
  const firstApi = await MeteringApi.connect(first.https);

  const batches = makeBatches();
  const all = batches.flat();
  const allEvents = all.flatMap((batch) => batch.events);
  let acknowledged = 0;
  let killed = false;
  let crashed: Promise<void> | undefined;
  const producers = batches.map(async (mine) => {
    for (const batch of mine) {
      if (killed) return;
      batch.acknowledged = await post(firstApi, batch);
      if (batch.acknowledged && ++acknowledged >= KILL_AFTER_ACKS && !killed) {
        killed = true;
        crashed = crash(first);
      }
    }
  });
  await Promise.all(producers);
  assert.ok(killed, 'the gateway was killed during ingestion');
  await crashed;
  const acknowledgedBefore = all.filter((batch) => batch.acknowledged);
  assert.ok(acknowledgedBefore.length >= KILL_AFTER_ACKS);
  assert.ok(acknowledgedBefore.length < all.length, 'some batches were left unacknowledged by the kill');

  const second = await spawnGateway(config, { dataDir });
  cleanups.push(() => crash(second));
  const api = await MeteringApi.connect(second.https);

  // Durability: every acknowledged event is there after the crash, before any retry.
  const survived = await api.listAllEvents({ type: TYPE });
  const survivedKeys = new Set(survived.map((item) => `${item.event.source}/${item.event.id}`));
  const lost = acknowledgedBefore.flatMap((batch) => batch.events).filter((e) => !survivedKeys.has(`${e.source}/${e.id}`));
  assert.deepEqual(lost.map((e) => `${e.source}/${e.id}`), [], 'acknowledged events lost by kill -9');
  t.diagnostic(`${acknowledgedBefore.length}/${all.length} batches acknowledged before kill -9; ${survived.length} events survived`);

  // Producers retry everything unacknowledged, and every third acknowledged batch again.
  const retries = all.filter((batch, index) => !batch.acknowledged || index % 3 === 0);
  await Promise.all(
    Array.from({ length: PRODUCERS }, async (_, p) => {
      for (const batch of retries.filter((_, index) => index % PRODUCERS === p)) await postUntilAcknowledged(api, batch);
    }),
  );

  const expectedCount = allEvents.length;
  const expectedSum = allEvents.reduce((sum, e) => sum + e.data.value, 0);
  const count = await api.totalWhen('crash_count', expectedCount);
  await sleep(300); // room for any late double-count to surface before the exact check
  assert.equal(totalOf(await api.queryOk('crash_count')), expectedCount, `count meter (first read ${count})`);
  assert.equal(totalOf(await api.queryOk('crash_sum')), expectedSum, 'sum meter');

  const stored = await api.listAllEvents({ type: TYPE });
  const keys = stored.map((item) => `${item.event.source}/${item.event.id}`);
  assert.equal(new Set(keys).size, keys.length, 'no event stored twice');
  assert.equal(keys.length, expectedCount, 'every event stored');

  // Per-subject totals add up to the same figures (each event in exactly one group).
  const bySubject = await api.queryOk('crash_sum', { group_by_dimensions: ['subject'] });
  assert.equal(bySubject.data.reduce((sum, row) => sum + Number(row.value), 0), expectedSum);

  // A graceful stop after all this exits 0 and a restart still reads the same totals.
  second.kill('SIGTERM');
  assert.equal(await second.exited, 0, 'SIGTERM exits 0');
  const third = await spawnGateway(config, { dataDir });
  cleanups.push(() => crash(third));
  const thirdApi = await MeteringApi.connect(third.https);
  assert.equal(await thirdApi.totalWhen('crash_count', expectedCount), expectedCount);
  assert.equal(totalOf(await thirdApi.queryOk('crash_sum')), expectedSum);
  third.kill('SIGTERM');
  await third.exited;
});

test('SIGTERM during concurrent ingestion exits 0 and keeps every acknowledged event', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tollgate-sigterm-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const first = await spawnGateway(config, { dataDir });
  cleanups.push(() => crash(first));
  const firstApi = await MeteringApi.connect(first.https);

  const batches = makeBatches().flat();
  let next = 0;
  let acknowledged = 0;
  let stopping = false;
  const producers = Array.from({ length: PRODUCERS }, async () => {
    while (next < batches.length) {
      const batch = batches[next++];
      batch.acknowledged = await post(firstApi, batch).catch(() => false);
      if (batch.acknowledged && ++acknowledged === KILL_AFTER_ACKS) {
        stopping = true;
        first.kill('SIGTERM');
      }
      if (stopping && !batch.acknowledged) return; // the gateway stopped answering
    }
  });
  await Promise.all(producers);
  assert.equal(await first.exited, 0, 'SIGTERM exits 0');

  const second = await spawnGateway(config, { dataDir });
  cleanups.push(() => crash(second));
  const api = await MeteringApi.connect(second.https);
  const kept = new Set((await api.listAllEvents({ type: TYPE })).map((item) => `${item.event.source}/${item.event.id}`));
  const lost = batches.filter((b) => b.acknowledged).flatMap((b) => b.events).filter((e) => !kept.has(`${e.source}/${e.id}`));
  assert.deepEqual(lost.map((e) => `${e.source}/${e.id}`), [], 'acknowledged events lost by a graceful stop');
  const expected = kept.size;
  assert.equal(await api.totalWhen('crash_count', expected), expected, 'the count meter matches the stored events');
  second.kill('SIGTERM');
  await second.exited;
});

test('kill -9 right after a meter is created or re-dimensioned over a large history: totals are exact after restart', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'tollgate-backfill-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const first = await spawnGateway(config, { dataDir });
  cleanups.push(() => crash(first));
  const firstApi = await MeteringApi.connect(first.https);

  const type = 'history';
  const events = Array.from({ length: 30_000 }, (_, i) =>
    event({ type, subject: `customer-${i % 5}`, time: new Date(Date.now() - i * 20_000).toISOString(), data: { value: (i % 10) + 1, region: i % 3 ? 'eu' : 'us' } }),
  );
  for (let i = 0; i < events.length; i += 5000) await firstApi.ingestOk(events.slice(i, i + 5000));
  await firstApi.createMeterOk({ key: 'history_sum', name: 'History', event_type: type, aggregation: 'sum', value_property: '$.value' });
  const regrouped = await firstApi.createMeterOk({ key: 'history_count', name: 'History count', event_type: type, aggregation: 'count' });
  const res = await firstApi.updateMeter(regrouped.key, { name: 'History count', dimensions: { region: '$.region' } });
  assert.equal(res.status, 200, res.text);
  await crash(first);

  const second = await spawnGateway(config, { dataDir });
  cleanups.push(() => crash(second));
  const api = await MeteringApi.connect(second.https);
  const expectedSum = events.reduce((sum, e) => sum + e.data.value, 0);
  assert.equal(await api.totalWhen('history_sum', expectedSum), expectedSum);
  const byRegion = await api.queryWhen('history_count', { group_by_dimensions: ['region'] }, (r) => r.data.length === 2);
  const counts = Object.fromEntries(byRegion.data.map((row) => [row.dimensions.region, Number(row.value)]));
  assert.deepEqual(counts, { eu: 20_000, us: 10_000 });
  second.kill('SIGTERM');
  await second.exited;
});
