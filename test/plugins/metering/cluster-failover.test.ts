/**
 * Failures under two nodes sharing PostgreSQL, in the middle of ingestion, with producers retrying
 * whatever was not acknowledged: kill -9 of the aggregating node, the aggregating node paused for
 * longer than its lease, and the database restarting. Nothing acknowledged is lost, nothing is
 * counted twice, and both nodes answer the same usage afterwards. While the aggregator is stopped, the
 * other node's ingest answers 503 once ten times queue_max_events wait in the journal, or once one has
 * waited MAX_LAG_MS.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test } from 'node:test';
import { spawnGateway, startGateway, type SpawnedGateway, type TestGateway } from '../../helpers/gateway.ts';
import { postgresForSuite, postgresSkipReason } from '../../helpers/postgres.ts';
import { crash, inParallel } from './catalogue-support.ts';
import { aggregating, apiOf, backlogIsBounded, batchesOf, config, expectedOf, lagIsBounded, makeEvents, post, postUntilAcknowledged, TYPE, usageOn, type StoppableAggregator } from './cluster-support.ts';

describe('metering fail-over between nodes sharing PostgreSQL', { skip: postgresSkipReason() }, () => {
  const suite = postgresForSuite();
  const nodeConfig = (schema: string, plugin?: Record<string, unknown>) =>
    config(suite.pg.settings({ pg_schema: schema, db_update_frequency: 0.2, worker_processes: 1 }), plugin);

  /** A node in a process of its own that aggregates, then a second node on the same schema that does not. */
  async function aggregatingAndOther(schema: string, plugin?: Record<string, unknown>): Promise<[SpawnedGateway, TestGateway]> {
    const first = await spawnGateway(nodeConfig(schema, plugin));
    suite.track(() => crash(first));
    assert.ok(await aggregating(first.admin), 'the first node aggregates');
    const other = await startGateway(nodeConfig(schema, plugin));
    suite.track(() => other.stop());
    assert.equal(await aggregating(other.admin), false, 'the second node does not');
    return [first, other];
  }

  test('kill -9 of the aggregating node mid-ingest, producers retrying against the survivor: exact totals, the survivor aggregates', async (t) => {
    const [first, survivor] = await aggregatingAndOther('failover');

    const events = makeEvents('kill', 4_000);
    const batches = batchesOf(events, 40).map((batch) => ({ events: batch, acknowledged: false }));
    let acknowledged = 0;
    let killed: Promise<void> | undefined;
    await inParallel(batches, 8, async (batch) => {
      if (killed) return;
      batch.acknowledged = await post(apiOf(first), batch.events);
      if (batch.acknowledged && ++acknowledged === 30) killed = crash(first);
    });
    assert.ok(killed, 'the aggregating node was killed during ingestion');
    await killed;
    const ackedBefore = batches.filter((b) => b.acknowledged);
    assert.ok(ackedBefore.length < batches.length, 'some batches were left unacknowledged by the kill');

    // Every event the dead node acknowledged is served by the survivor, before any retry.
    const stored = new Set((await apiOf(survivor).listAllEvents({ type: TYPE })).map((item) => item.event.id));
    const lost = ackedBefore.flatMap((b) => b.events).filter((e) => !stored.has(e.id));
    assert.deepEqual(lost.map((e) => e.id), [], 'acknowledged events lost by kill -9');
    t.diagnostic(`${ackedBefore.length}/${batches.length} batches acknowledged before kill -9`);

    // Producers retry every unacknowledged batch, and every third acknowledged one, against the survivor.
    const retries = batches.filter((b, i) => !b.acknowledged || i % 3 === 0);
    await inParallel(retries, 8, (batch) => postUntilAcknowledged(apiOf(survivor), batch.events));
    const usage = await usageOn(apiOf(survivor));
    assert.deepEqual(usage.totals, expectedOf(events));
    assert.ok(await aggregating(survivor.admin), 'the survivor took aggregation over');
    const listed = await apiOf(survivor).listAllEvents({ type: TYPE });
    assert.equal(listed.length, events.length, 'each event stored once');
  });
  test('the aggregating node paused longer than its lease mid-ingest: the other node takes over, the paused one writes nothing late', async (t) => {
    const [paused, other] = await aggregatingAndOther('paused');

    const events = makeEvents('pause', 3_000);
    const batches = batchesOf(events, 30);
    const signal = (name: NodeJS.Signals) => process.kill(-paused.child.pid!, name);
    // A third of the batches to both nodes; the aggregating node is paused as soon as they are all
    // acknowledged (it is still aggregating them), and the rest go to the other node.
    await inParallel(batches.slice(0, 34), 6, (batch, i) => postUntilAcknowledged(apiOf(i % 2 === 0 ? paused : other), batch));
    signal('SIGSTOP');
    await inParallel(batches.slice(34), 6, (batch) => postUntilAcknowledged(apiOf(other), batch));
    // The other node counts everything acknowledged so far once the lease has passed to it.
    const whilePaused = await usageOn(apiOf(other));
    assert.ok(await aggregating(other.admin), 'the other node took aggregation over');
    signal('SIGCONT');
    // Awake again (it answers), the paused node finds at its next renewal that its lease is gone; what it
    // had under way is refused.
    await aggregating(paused.admin);
    await sleep(2_000);
    const expected = expectedOf(events);
    assert.deepEqual(whilePaused.totals, expected, 'counted while the first node was paused');
    assert.deepEqual((await usageOn(apiOf(other))).totals, expected, 'nothing counted late');
    assert.deepEqual((await usageOn(apiOf(paused))).totals, expected, 'the resumed node answers the same');
    assert.equal((await apiOf(other).listAllEvents({ type: TYPE })).length, events.length, 'each event stored once');
    t.diagnostic(`aggregating after the pause: ${(await aggregating(other.admin)) ? 'the other node' : 'the resumed node'}`);
  });

  test('the database restarts mid-ingest: every acknowledged event is counted once, on both nodes', async () => {
    const schema = 'restart';
    const nodes = [
      await startGateway(nodeConfig(schema)),
      await startGateway(nodeConfig(schema)),
    ];
    for (const node of nodes) suite.track(() => node.stop());
    const events = makeEvents('restart', 3_000);
    let acknowledged = 0;
    let restarted: Promise<void> | undefined;
    await inParallel(batchesOf(events, 30), 6, async (batch, i) => {
      await postUntilAcknowledged(apiOf(nodes[i % 2]), batch);
      if (++acknowledged === 20) restarted = suite.pg.pause().then(() => sleep(1_500)).then(() => suite.pg.resume());
    });
    assert.ok(restarted, 'the database was stopped during ingestion');
    await restarted;
    const expected = expectedOf(events);
    const onA = await usageOn(apiOf(nodes[0]));
    assert.deepEqual(onA.totals, expected);
    assert.deepEqual(await usageOn(apiOf(nodes[1])), onA, 'both nodes answer the same');
    assert.equal((await apiOf(nodes[0]).listAllEvents({ type: TYPE })).length, events.length, 'each event stored once');
  });

  /** Two nodes on a fresh schema with `queue_max_events`: the aggregating node's process, and the other node's API. */
  async function stoppableAggregator(queueMaxEvents: number): Promise<StoppableAggregator> {
    const [first, other] = await aggregatingAndOther(suite.schema('backlog'), { queue_max_events: queueMaxEvents });
    return { api: apiOf(other), aggregator: first.child.pid! };
  }

  test('an aggregating node that stops: the backlog in the journal is bounded, and all of it is counted once it resumes', () => backlogIsBounded(stoppableAggregator));

  test('an aggregating node that stops: ingest is refused once an acknowledged event has waited MAX_LAG_MS, though few wait; all are counted once it resumes', () =>
    lagIsBounded(stoppableAggregator));
});
