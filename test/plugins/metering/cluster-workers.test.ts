/**
 * Metering on one LevelDB node with two worker processes (the primary owns the database, the workers
 * reach it over IPC): events ingested concurrently through both workers, each twice, give exact totals
 * whichever worker answers. An aggregator that stops (SIGSTOP) leaves the other worker's inbox filling:
 * its ingest answers 503 once ten times queue_max_events wait there, or once the oldest has waited
 * MAX_LAG_MS, and every event it acknowledged is counted once aggregation resumes.
 */
import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { MAX_LAG_MS } from '../../../plugins/metering/aggregator.ts';
import { request, spawnGateway, type SpawnedGateway } from '../../helpers/gateway.ts';
import { waitFor } from '../../src/support.ts';
import { crash, inParallel, sleep } from './catalogue-support.ts';
import { apiOf, batchesOf, config, expectedOf, makeEvents, postUntilAcknowledged, shuffled, usageOn } from './cluster-support.ts';

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
    await inParallel(batches, 12, (batch) => postUntilAcknowledged(apiOf(node!), batch));
    const expected = expectedOf(events);
    // Several queries, each answered by whichever worker takes the connection: all the same.
    for (let i = 0; i < 6; i++) assert.deepEqual((await usageOn(apiOf(node))).totals, expected);
    const pids = (await request(node.admin + '/')).json().pids;
    assert.equal(pids.workers.length, 2, 'two workers serve');
  });

  /** A fresh node of two workers with `queue_max_events`, and the pid of its aggregating worker. */
  async function nodeWithAggregator(queueMaxEvents: number): Promise<number> {
    if (node) await crash(node);
    const settings = config({ worker_processes: 2, proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], log_level: 'info', access_log: false }) as any;
    settings.routes[0].plugins[0].config.queue_max_events = queueMaxEvents;
    const spawned = (node = await spawnGateway(settings));
    let line: string | undefined;
    await waitFor(() => (line = spawned.output().split('\n').find((l) => l.includes('this process aggregates the events'))) !== undefined, 'an aggregator');
    return JSON.parse(line!).pid as number;
  }

  test('an aggregator that stops: the backlog of acknowledged events is bounded, and all of them are counted once it resumes', async () => {
    const queueMaxEvents = 20;
    const aggregator = await nodeWithAggregator(queueMaxEvents);
    const api = apiOf(node!);
    const events = makeEvents('stalled', 400);
    const acknowledged: Record<string, any>[] = [];
    const refusals: string[] = [];
    process.kill(aggregator, 'SIGSTOP');
    try {
      // Sent one after the other, so each is answered by the worker that still runs: nothing drains its inbox.
      for (const batch of batchesOf(events, 10)) {
        const res = await api.ingest(batch);
        if (res.status === 503) refusals.push(String(res.headers['retry-after']));
        else if (res.status < 300) acknowledged.push(...batch);
        else assert.fail(`ingest answered ${res.status}: ${res.text}`);
      }
    } finally {
      process.kill(aggregator, 'SIGCONT');
    }
    assert.ok(refusals.length > 0, 'ingest refuses once the backlog is full');
    assert.ok(refusals.every((r) => r === '1'), 'with Retry-After');
    assert.ok(acknowledged.length <= 10 * queueMaxEvents, `${acknowledged.length} events acknowledged while nothing aggregated`);
    // Resumed (or taken over): every acknowledged event counted, once; and ingest is open again.
    assert.deepEqual((await usageOn(api)).totals, expectedOf(acknowledged));
    const late = events.slice(0, 10);
    await waitFor(async () => (await api.ingest(late)).status < 300, 'ingest to accept events again');
    const counted = [...acknowledged, ...late.filter((e) => !acknowledged.includes(e))];
    assert.deepEqual((await usageOn(api)).totals, expectedOf(counted));
  });

  test('an aggregator that stops: ingest is refused once an acknowledged event has waited MAX_LAG_MS, though few wait; all are counted once it resumes', async () => {
    const aggregator = await nodeWithAggregator(100_000);
    const api = apiOf(node!);
    // More than the bound lets through at a batch every 25 ms or so; it refuses before the other worker
    // takes the stopped one's lease over (LEASE_TTL_MS).
    const events = makeEvents('lagging', 4_000);
    const acknowledged: Record<string, any>[] = [];
    // Taken before the first request: its events cannot have waited longer than this.
    let firstSent: number | undefined;
    let refused: { after: number; retryAfter: string; detail: string } | undefined;
    process.kill(aggregator, 'SIGSTOP');
    try {
      for (const batch of batchesOf(events, 5)) {
        firstSent ??= performance.now();
        const res = await api.ingest(batch);
        if (res.status === 503) {
          refused = { after: performance.now() - firstSent, retryAfter: String(res.headers['retry-after']), detail: res.json().detail };
          break;
        }
        assert.ok(res.status < 300, `ingest answered ${res.status}: ${res.text}`);
        acknowledged.push(...batch);
        await sleep(25);
      }
    } finally {
      process.kill(aggregator, 'SIGCONT');
    }
    assert.ok(refused, `ingest refused nothing while ${acknowledged.length} events waited`);
    assert.match(refused.detail, /still being aggregated/);
    assert.equal(refused.retryAfter, '1');
    assert.ok(refused.after >= MAX_LAG_MS, `refused ${Math.round(refused.after)} ms after the first event was sent`);
    assert.ok(acknowledged.length < 100_000, 'far fewer than the backlog bound in events');
    assert.deepEqual((await usageOn(api)).totals, expectedOf(acknowledged));
    await waitFor(async () => (await api.ingest(events.slice(0, 5))).status < 300, 'ingest to accept events again');
    // After a quiet spell longer than the bound, ingest is judged on what the store holds now: those
    // events were aggregated long ago, even if this process has not looked since.
    await sleep(MAX_LAG_MS + 1_000);
    for (const batch of batchesOf(events.slice(5, 25), 5)) assert.equal((await api.ingest(batch)).status, 202);
  });
});
