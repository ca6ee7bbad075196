/**
 * The same load counts the same on both process models: 100,000 events ingested by one process, and by a
 * node of two workers whose worker, then primary, is killed (kill -9) mid-load and which is restarted on
 * the same data. Producers re-send what was not acknowledged, as a producer that lost the answer does.
 * Aggregates by day, subject and dimension must be identical, and equal to the totals computed here.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, test } from 'node:test';
import { spawnGateway, tempDir, type SpawnedGateway } from '../../helpers/gateway.ts';
import { crash, event, MeteringApi, meteringConfig, sleep, type QueryResult } from './catalogue-support.ts';

const TYPE = 'load';
const EVENTS = 100_000;
const BATCH = 1_000;
const PRODUCERS = 4;
const SUBJECTS = 13;
const KINDS = ['a', 'b', 'c'];
const DAY_MS = 86_400_000;
/** Whole days before now over which the events are spread (inside the accepted window). */
const DAYS = 20;

const meters = [
  { key: 'load_count', name: 'Load count', event_type: TYPE, aggregation: 'count', dimensions: { kind: '$.kind' } },
  { key: 'load_sum', name: 'Load sum', event_type: TYPE, aggregation: 'sum', value_property: '$.value', dimensions: { kind: '$.kind' } },
];
const configOf = (workers: number) => meteringConfig({ meters, gateway: { worker_processes: workers }, metering: { max_events_per_request: BATCH } });

const start = Math.floor(Date.now() / DAY_MS) * DAY_MS - DAYS * DAY_MS;
const valueOf = (i: number) => ((i * 7919) % 997) + 1;
const batches: Record<string, any>[][] = Array.from({ length: EVENTS / BATCH }, (_, b) =>
  Array.from({ length: BATCH }, (_, j) => {
    const i = b * BATCH + j;
    return event({
      id: `load-${i}`,
      source: 'process-models',
      type: TYPE,
      subject: `customer-${i % SUBJECTS}`,
      // Spread over the days, every batch touching many of them.
      time: new Date(start + ((i * 104_729) % (DAYS * DAY_MS))).toISOString(),
      data: { value: valueOf(i), kind: KINDS[i % KINDS.length] },
    });
  }),
);

const cleanups: (() => Promise<unknown>)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

async function spawn(workers: number, dataDir: string): Promise<{ gateway: SpawnedGateway; api: MeteringApi }> {
  const gateway = await spawnGateway(configOf(workers), { dataDir });
  cleanups.push(() => crash(gateway));
  return { gateway, api: await MeteringApi.connect(gateway.https) };
}

/**
 * Posts every batch until acknowledged, PRODUCERS at a time, through `current()` (which a kill may
 * replace); `onAcknowledged` runs after each acknowledgement with the count so far.
 */
async function ingestAll(current: () => MeteringApi, onAcknowledged: (count: number) => Promise<void> = async () => undefined): Promise<void> {
  let next = 0;
  let acknowledged = 0;
  await Promise.all(
    Array.from({ length: PRODUCERS }, async () => {
      while (next < batches.length) {
        const batch = batches[next++];
        for (let attempt = 0; ; attempt++) {
          assert.ok(attempt < 600, 'a batch was never acknowledged');
          const res = await current().ingest(batch).catch(() => undefined);
          if (res?.status === 202) break;
          // Only an outage or backpressure may refuse it.
          if (res) assert.equal(res.status, 503, `ingest answered ${res.status}: ${res.text}`);
          await sleep(100);
        }
        await onAcknowledged(++acknowledged);
      }
    }),
  );
}

/** Counts and sums by day, subject and kind: every aggregate the load made. */
async function aggregates(api: MeteringApi): Promise<Record<string, QueryResult>> {
  const body = { granularity: 'P1D', from: new Date(start).toISOString(), group_by_dimensions: ['subject', 'kind'] };
  const sorted = (r: QueryResult) => ({ ...r, data: [...r.data].sort((x, y) => JSON.stringify(x).localeCompare(JSON.stringify(y))) });
  // Reads are read-your-writes: once every batch is acknowledged, a 200 counts them all. After a restart the
  // backlog may take longer to aggregate than one read waits (503, retry later): retried.
  const query = async (meter: string): Promise<QueryResult> => {
    for (let attempt = 0; ; attempt++) {
      const res = await api.query(meter, body);
      if (res.status !== 503 || attempt >= 20) {
        assert.equal(res.status, 200, `query answered ${res.status}: ${res.text}`);
        return res.json();
      }
      await sleep(1_000);
    }
  };
  return { count: sorted(await query('load_count')), sum: sorted(await query('load_sum')) };
}

/** The pids of the processes `pid` started (a node's workers), from /proc. */
function childrenOf(pid: number): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((name) => {
      try {
        // Field 4 of stat is the parent's pid; the command name (field 2) may hold spaces, so split after it.
        return Number(readFileSync(`/proc/${name}/stat`, 'utf8').split(') ')[1].split(' ')[1]) === pid;
      } catch {
        return false;
      }
    })
    .map(Number);
}

test('100,000 events aggregate identically on one process and on two workers killed mid-load (a worker, then the primary)', { timeout: 600_000 }, async (t) => {
  const alone = await spawn(1, tempDir());
  await ingestAll(() => alone.api);
  const expected = await aggregates(alone.api);
  assert.equal(
    expected.sum.data.reduce((sum, row) => sum + Number(row.value), 0),
    batches.flat().reduce((sum, e) => sum + e.data.value, 0),
    'one process: the sum is the sum of the values sent',
  );
  assert.equal(expected.count.data.length, SUBJECTS * KINDS.length * DAYS, 'one process: a row per day, subject and kind');
  await crash(alone.gateway);

  const dataDir = tempDir();
  let node = await spawn(2, dataDir);
  let restarted: Promise<void> | null = null;
  await ingestAll(
    () => node.api,
    async (acknowledged) => {
      if (acknowledged === 30) {
        const [worker] = childrenOf(node.gateway.child.pid!);
        assert.ok(worker, 'the node has worker processes');
        t.diagnostic(`kill -9 of worker ${worker} after ${acknowledged} acknowledged batches`);
        process.kill(worker, 'SIGKILL');
      }
      if (acknowledged === 60) {
        t.diagnostic(`kill -9 of the primary after ${acknowledged} acknowledged batches`);
        const killed = node.gateway;
        restarted = (async () => {
          process.kill(killed.child.pid!, 'SIGKILL');
          await killed.exited;
          // Its workers (how they notice is tested elsewhere) must not outlive the test.
          killed.kill('SIGKILL');
          node = await spawn(2, dataDir);
        })();
        await restarted;
      }
    },
  );
  assert.ok(restarted, 'the primary was killed mid-load');
  assert.deepEqual(await aggregates(node.api), expected, 'two workers, killed mid-load: the same aggregates as one process');
});
