/**
 * Metering on two nodes sharing one PostgreSQL: the same events (with duplicates) sent to both at once
 * are stored and counted once and both nodes answer the same usage; an event posted to both at the
 * same moment counts once; a meter created on one node is served by the other at once.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { postgresForSuite, postgresSkipReason } from '../../helpers/postgres.ts';
import { totalOf, inParallel } from './catalogue-support.ts';
import { apiOf, batchesOf, config, expectedOf, makeEvents, postUntilAcknowledged, shuffled, TYPE, usageOn } from './cluster-support.ts';

describe('metering on nodes sharing PostgreSQL', { skip: postgresSkipReason() }, () => {
  const suite = postgresForSuite();
  const settings = (schema: string) => suite.pg.settings({ pg_schema: schema, db_update_frequency: 0.2, worker_processes: 1 });

  async function twoNodes(): Promise<[TestGateway, TestGateway]> {
    const schema = suite.schema('metering');
    const a = await startGateway(config(settings(schema)));
    suite.track(() => a.stop());
    const b = await startGateway(config(settings(schema)));
    suite.track(() => b.stop());
    return [a, b];
  }

  test('the same 10,000 events, with duplicates, sent to two nodes at once: exact totals, the same on both nodes', async () => {
    const [a, b] = await twoNodes();
    const events = makeEvents('dup', 10_000);
    // Every event goes to both nodes (in different orders and batchings), and one in ten once more within its batch.
    const toA = batchesOf(events, 100).map((batch) => [...batch, ...batch.filter((_, i) => i % 10 === 0)]);
    const toB = batchesOf(shuffled(events, 7), 250);
    await Promise.all([
      inParallel(toA, 4, (batch) => postUntilAcknowledged(apiOf(a), batch)),
      inParallel(toB, 4, (batch) => postUntilAcknowledged(apiOf(b), batch)),
    ]);
    const expected = expectedOf(events);
    const onA = await usageOn(apiOf(a));
    const onB = await usageOn(apiOf(b));
    assert.deepEqual(onA.totals, expected, 'node A');
    assert.deepEqual(onB, onA, 'node B answers the same usage');
    const listed = await apiOf(b).listAllEvents({ type: TYPE });
    assert.equal(listed.length, events.length, 'each event stored once');
  });

  test('an event posted to both nodes at the same moment is stored and counted once', async () => {
    const [a, b] = await twoNodes();
    const events = makeEvents('race', 30);
    for (const e of events) {
      await Promise.all([apiOf(a).ingestOk(e), apiOf(b).ingestOk(e)]);
    }
    assert.equal(totalOf(await apiOf(b).queryOk('cluster_count')), events.length);
    assert.equal(totalOf(await apiOf(a).queryOk('cluster_count')), events.length);
    const listed = await apiOf(a).listAllEvents({ type: TYPE });
    assert.deepEqual(listed.map((item) => item.event.id).sort(), events.map((e) => e.id).sort());
  });

  test('a meter created on one node is served by the other at once, with the events either node took', async () => {
    const [a, b] = await twoNodes();
    const events = makeEvents('meter', 200);
    await apiOf(a).ingestOk(events.slice(0, 100));
    const created = await apiOf(a).createMeterOk({ key: 'late_sum', name: 'Late sum', event_type: TYPE, aggregation: 'sum', value_property: '$.value', dimensions: { user: '$.user' } });
    const onB = await apiOf(b).getMeter('late_sum');
    assert.equal(onB.status, 200, onB.text);
    assert.equal(onB.json().id, created.id);
    await apiOf(b).ingestOk(events.slice(100));
    const expected = expectedOf(events).sum;
    // Events before the meter existed come in through its backfill, later ones as they are aggregated.
    const total = await apiOf(b).totalWhen('late_sum', expected);
    assert.equal(total, expected);
    assert.equal(totalOf(await apiOf(a).queryOk('late_sum')), expected);
    assert.equal((await apiOf(b).deleteMeter('late_sum')).status, 204);
    assert.equal((await apiOf(a).getMeter('late_sum')).status, 404, 'deleted on B, gone on A');
    assert.equal((await apiOf(a).createMeter({ key: 'cluster_count', name: 'x', event_type: TYPE, aggregation: 'count' })).status, 409, 'keys stay unique across nodes');
  });
});
