/**
 * Ingest while PostgreSQL restarts (issue 28, item 7), on a gateway in a process of its own and on a node
 * of two worker processes: producers keep posting batches through `pg_ctl restart -m fast` and through a
 * stop of a few seconds, sending a batch again after a 503 as the answer tells them. Every answer is a 202
 * or a clear 503 (problem+json, Retry-After; never a 500, never a dropped connection), ingest resumes by
 * itself once the database is back, no process of the node died meanwhile, and every event is stored
 * and counted exactly once.
 */
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test } from 'node:test';
import { request, spawnGateway, type Reply } from '../../helpers/gateway.ts';
import { postgresForSuite, postgresSkipReason } from '../../helpers/postgres.ts';
import { assertProblem, crash, inParallel } from './catalogue-support.ts';
import { apiOf, batchesOf, config, expectedOf, makeEvents, TYPE, usageOn } from './cluster-support.ts';

/** How long a producer waits before sending a refused batch again (the gateway says 1 s; this keeps the test short). */
const RETRY_MS = 100;

describe('metering ingest while PostgreSQL restarts', { skip: postgresSkipReason() }, () => {
  const suite = postgresForSuite();

  const outages = [
    { name: 'pg_ctl restart -m fast', workers: 1, interrupt: () => suite.pg.restart() },
    {
      name: 'a stop of 3 s, then a start',
      workers: 2,
      interrupt: async () => {
        await suite.pg.pause();
        await sleep(3_000);
        await suite.pg.resume();
      },
    },
  ];

  for (const { name, workers, interrupt } of outages) {
    test(`${name} mid-ingest (${workers} worker process${workers > 1 ? 'es' : ''}): a 202 or a clear 503 each time, every event stored and counted once`, async () => {
      const gw = await spawnGateway(
        config({ ...suite.pg.settings({ pg_schema: suite.schema('ingest'), db_update_frequency: 0.2, worker_processes: workers }), proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'] }),
      );
      suite.track(() => crash(gw));
      const api = apiOf(gw);
      const processes = async () => JSON.stringify((await request(gw.admin + '/')).json().pids);
      const before = await processes();

      const events = makeEvents(`restart-${workers}`, 3_000);
      const answers: string[] = [];
      let acknowledged = 0;
      let interrupted: Promise<void> | undefined;
      // Each batch until it is acknowledged, as a producer does; the outage starts after the tenth.
      await inParallel(batchesOf(events, 10), 4, async (batch) => {
        for (;;) {
          let reply: Reply;
          try {
            reply = await api.ingest(batch);
          } catch (err) {
            answers.push((err as NodeJS.ErrnoException).code ?? String(err));
            await sleep(RETRY_MS);
            continue;
          }
          answers.push(String(reply.status));
          if (reply.status !== 503) break;
          assert.equal(assertProblem(reply, 503).detail, 'the store is unavailable; retry later');
          assert.equal(reply.headers['retry-after'], '1');
          await sleep(RETRY_MS);
        }
        if (++acknowledged === 10) interrupted = interrupt();
      });
      assert.ok(interrupted, 'the database went away mid-ingest');
      await interrupted;

      assert.deepEqual(answers.filter((a) => a !== '202' && a !== '503'), [], 'no 500 and no dropped connection');
      assert.ok(answers.includes('503'), 'some batches met the outage');
      assert.equal(await processes(), before, 'no process of the node died');
      const stored = (await api.listAllEvents({ type: TYPE })).map((item) => item.event.id);
      assert.equal(stored.length, events.length, 'every event stored once');
      assert.equal(new Set(stored).size, events.length);
      assert.deepEqual((await usageOn(api)).totals, expectedOf(events), 'and counted once');
    });
  }
});
