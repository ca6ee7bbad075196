/**
 * Metering on one LevelDB node with two worker processes (the primary owns the database, the workers
 * reach it over IPC): events ingested concurrently through both workers, each twice, give exact totals
 * whichever worker answers.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { request, spawnGateway, type SpawnedGateway } from '../../helpers/gateway.ts';
import { crash, inParallel } from './catalogue-support.ts';
import { apiOf, batchesOf, config, expectedOf, makeEvents, shuffled, usageOn } from './cluster-support.ts';

describe('metering on one LevelDB node with two worker processes', () => {
  let node: SpawnedGateway | undefined;
  after(async () => {
    if (node) await crash(node);
  });

  test('events ingested concurrently through both workers: exact totals from either', async () => {
    // The node prints its listeners through its log (info), once for all workers.
    node = await spawnGateway(config({ worker_processes: 2, proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], log_level: 'info', access_log: false }));
    const events = makeEvents('workers', 6_000);
    // Every event twice, over many connections (the workers share the listening socket).
    const batches = [...batchesOf(events, 100), ...batchesOf(shuffled(events, 3), 150)];
    await inParallel(batches, 12, async (batch) => void (await apiOf(node!).ingestOk(batch)));
    const expected = expectedOf(events);
    // Several queries, each answered by whichever worker takes the connection: all the same.
    for (let i = 0; i < 6; i++) assert.deepEqual((await usageOn(apiOf(node))).totals, expected);
    const pids = (await request(node.admin + '/')).json().pids;
    assert.equal(pids.workers.length, 2, 'two workers serve');
  });
});
