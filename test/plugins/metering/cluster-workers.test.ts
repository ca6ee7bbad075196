/**
 * Metering on one LevelDB node with two worker processes (the primary owns the database and runs the
 * single writer; the workers hand their events to it over IPC): events ingested concurrently through both
 * workers, each twice, give exact totals whichever worker answers. A primary killed mid-ingest (SIGKILL to
 * it alone) takes its workers with it, and the node starts again on the same data directory (its pid file
 * stale, the LevelDB lock released) with every event it acknowledged, counted once; events acknowledged
 * before the new primary aggregates (the dead one's lease has yet to lapse) wait in the workers' inboxes
 * and are counted once it does.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { isAlive, request, spawnGateway, tempDir, type SpawnedGateway } from '../../helpers/gateway.ts';
import { openEmbeddedStore } from '../../../src/store/open.ts';
import { AGGREGATOR_LEASE_KEY } from '../../../plugins/metering/shared/keys.ts';
import { waitFor } from '../../helpers/support.ts';
import { crash, inParallel } from './catalogue-support.ts';
import { apiOf, batchesOf, config, expectedOf, makeEvents, post, postUntilAcknowledged, shuffled, TYPE, usageOn } from './cluster-support.ts';

const nodeConfig = (plugin?: Record<string, unknown>) => config({ worker_processes: 2, proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], log_level: 'info', access_log: false }, plugin);

describe('metering on one LevelDB node with two worker processes', () => {
  let node: SpawnedGateway | undefined;
  after(async () => {
    if (node) await crash(node);
  });

  test('events ingested concurrently through both workers: exact totals from either', async () => {
    // The node prints its listeners through its log (info), once for all workers.
    node = await spawnGateway(nodeConfig());
    const events = makeEvents('workers', 6_000);
    // Every event twice, over many connections (the workers share the listening socket).
    const batches = [...batchesOf(events, 100), ...batchesOf(shuffled(events, 3), 150)];
    await inParallel(batches, 12, (batch) => postUntilAcknowledged(apiOf(node!), batch));
    const expected = expectedOf(events);
    // Several queries, each answered by whichever worker takes the connection: all the same.
    for (let i = 0; i < 6; i++) assert.deepEqual((await usageOn(apiOf(node))).totals, expected);
    const pids = (await request(node.admin + '/')).json().pids;
    assert.equal(pids.workers.length, 2, 'two workers serve');
    // The node's one dedupe filter (the primary's), as every worker reports it.
    const metric = async (name: string) => Number(new RegExp(`^${name} (\\d+)$`, 'm').exec((await request(node!.admin + '/metrics')).text)?.[1]);
    await waitFor(async () => (await metric('tollgate_metering_dedupe_filter_hashes')) === events.length, 'the metric to show the primary\'s filter');
    // Each worker's hand-offs were counted when the primary acknowledged them, by the worker (an inbox entry is
    // counted by the primary, which has no metrics): every event once, its duplicate not.
    assert.equal(await metric('tollgate_metering_events_ingested_total'), events.length);
    assert.equal((await request(node.admin + '/metering/status')).json().dedupe_filter.hashes, events.length);
  });

  test("events taken while an earlier run's aggregator lease holds: kept in the workers' inboxes, stored once the primary takes the lease", async () => {
    if (node) await crash(node);
    const dataDir = tempDir();
    // An earlier run's aggregator that was killed: its lease holds for a while yet.
    const store = await openEmbeddedStore(dataDir);
    await store.namespace('plugin.metering').put(AGGREGATOR_LEASE_KEY, 'earlier.1.run#1', { ttlMs: 20_000 });
    await store.close();
    // No declared meters: their sync would wait for the aggregator before the node serves.
    const leased = (node = await spawnGateway({ ...nodeConfig(), meters: [] }, { dataDir }));
    const events = makeEvents('leased', 200);
    for (const batch of batchesOf(events, 20)) assert.ok(await post(apiOf(leased), batch), 'acknowledged while the lease holds');
    assert.doesNotMatch(leased.output(), /aggregates the events/, 'the primary waits for the earlier lease to lapse');
    // A read waits until everything acknowledged is stored: the primary drains the inboxes once it aggregates.
    const stored = (await apiOf(leased).listAllEvents({ type: TYPE })).map((item) => item.event.id).sort();
    assert.deepEqual(stored, events.map((e) => e.id).sort());
    assert.match(leased.output(), /aggregates the events/);
  });

  test('the primary killed mid-ingest: its workers exit, and the node restarts on the stale pid file with every acknowledged event', async () => {
    if (node) await crash(node);
    const killed = (node = await spawnGateway(nodeConfig()));
    const workers: number[] = (await request(killed.admin + '/')).json().pids.workers;
    const pidFile = join(killed.dataDir, 'tollgate.pid');
    const events = makeEvents('orphaned', 3_000);
    const batches = batchesOf(events, 10).map((batch) => ({ events: batch, acknowledged: false }));
    let acknowledgedCount = 0;
    let primaryKilled = false;
    await inParallel(batches, 4, async (batch) => {
      if (primaryKilled) return;
      batch.acknowledged = await post(apiOf(killed), batch.events);
      if (batch.acknowledged && ++acknowledgedCount === 20) {
        primaryKilled = true;
        process.kill(killed.child.pid!, 'SIGKILL'); // the primary alone (node.kill would end the whole group)
      }
    });
    await waitFor(() => workers.every((pid) => !isAlive(pid)), 'both workers to exit without their primary');
    assert.equal(readFileSync(pidFile, 'utf8').trim(), String(killed.child.pid), 'the dead primary\'s pid file is left behind');

    const restarted = (node = await spawnGateway(nodeConfig(), { dataDir: killed.dataDir }));
    assert.equal(readFileSync(pidFile, 'utf8').trim(), String(restarted.child.pid), 'the new primary writes its own');
    const stored = new Set((await apiOf(restarted).listAllEvents({ type: TYPE })).map((item) => item.event.id));
    const acknowledged = batches.filter((b) => b.acknowledged).flatMap((b) => b.events);
    assert.deepEqual(acknowledged.filter((e) => !stored.has(e.id)).map((e) => e.id), [], 'acknowledged events lost with the primary');
    // Events the node stored without answering (the kill came first) are there too, each counted once.
    assert.deepEqual((await usageOn(apiOf(restarted))).totals, expectedOf(events.filter((e) => stored.has(e.id))));
    // Taken at once, though the dead primary's lease holds for a few seconds more: through the inboxes.
    const late = makeEvents('after-restart', 40);
    for (const batch of batchesOf(late, 10)) assert.ok(await post(apiOf(restarted), batch), 'acknowledged right after the restart');
    const counted = [...events.filter((e) => stored.has(e.id)), ...late];
    assert.deepEqual((await usageOn(apiOf(restarted))).totals, expectedOf(counted));
    restarted.kill('SIGTERM');
    assert.equal(await restarted.exited, 0);
  });
});
