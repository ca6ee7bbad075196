/**
 * Shared by the metering cluster tests: a gateway.yaml with the metering plugin on an open route and
 * three meters (count, sum, unique_count) over one event type, deterministic events, and the usage a
 * node answers.
 */
import assert from 'node:assert/strict';
import { MAX_LAG_MS } from '../../../plugins/metering/storage/inbox.ts';
import { request } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';
import { event, MeteringApi, ROUTE_PATH, sleep, totalOf, type Reply } from './catalogue-support.ts';

export const TYPE = 'cluster';
const METERS = [
  { key: 'cluster_count', name: 'Cluster count', event_type: TYPE, aggregation: 'count' },
  { key: 'cluster_sum', name: 'Cluster sum', event_type: TYPE, aggregation: 'sum', value_property: '$.value' },
  { key: 'cluster_unique', name: 'Cluster unique', event_type: TYPE, aggregation: 'unique_count', value_property: '$.user' },
];

export function config(gateway: Record<string, unknown>, plugin: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    gateway,
    routes: [
      {
        name: 'metering',
        paths: [ROUTE_PATH],
        strip_path: false,
        plugins: [{ name: 'metering', config: { allow_unauthenticated: true, ...plugin } }],
      },
    ],
    meters: METERS,
  };
}

/** The metering API of a node over plain HTTP (the route needs no token). */
export const apiOf = (node: { http: string }) => new MeteringApi(node.http + ROUTE_PATH, 'unused');

/** `count` distinct events of TYPE: id `<prefix>-<i>`, value 1..97, one of 13 subjects, one of 50 users. */
export function makeEvents(prefix: string, count: number): Record<string, any>[] {
  const base = Date.now() - count * 1000;
  return Array.from({ length: count }, (_, i) =>
    event({ id: `${prefix}-${i}`, source: 'cluster-test', type: TYPE, subject: `customer-${i % 13}`, time: new Date(base + i * 1000).toISOString(), data: { value: (i % 97) + 1, user: `user-${i % 50}` } }),
  );
}

export function batchesOf<T>(items: T[], size: number): T[][] {
  return Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size));
}

/** Deterministic shuffle (a linear congruential generator), so a failure can be replayed. */
export function shuffled<T>(items: T[], seed: number): T[] {
  const out = [...items];
  let state = seed;
  for (let i = out.length - 1; i > 0; i--) {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    const j = state % (i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

export interface Expected {
  count: number;
  sum: number;
  unique: number;
}

export function expectedOf(events: Record<string, any>[]): Expected {
  return { count: events.length, sum: events.reduce((s, e) => s + e.data.value, 0), unique: new Set(events.map((e) => e.data.user)).size };
}

/** The three totals and the per-subject sums a node answers (a query waits for acknowledged events itself). */
export async function usageOn(api: MeteringApi): Promise<{ totals: Expected; bySubject: Record<string, string> }> {
  const totals = { count: totalOf(await api.queryOk('cluster_count')), sum: totalOf(await api.queryOk('cluster_sum')), unique: totalOf(await api.queryOk('cluster_unique')) };
  const grouped = await api.queryOk('cluster_sum', { group_by_dimensions: ['subject'] });
  const bySubject = Object.fromEntries(grouped.data.map((row: any) => [row.subject ?? row.dimensions?.subject, row.value]).sort());
  return { totals, bySubject };
}

/** Posts a batch; true when acknowledged. A transport error or a 503 is not an acknowledgement. */
export async function post(api: MeteringApi, events: Record<string, any>[]): Promise<boolean> {
  let res: Reply;
  try {
    res = await api.ingest(events);
  } catch {
    return false;
  }
  if (res.status === 503) return false;
  assert.equal(res.status, 202, `ingest answered ${res.status}: ${res.text}`);
  return true;
}

/** Posts a batch as a producer does: again after a transport error or a 503 (the node is busy or failing over), for up to a minute. */
export async function postUntilAcknowledged(api: MeteringApi, events: Record<string, any>[]): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (await post(api, events)) return;
    await sleep(200);
  }
  assert.fail('a batch was never acknowledged');
}

/** Whether a process of the node behind `admin` aggregates (whichever of its workers answers). */
export async function aggregating(admin: string): Promise<boolean> {
  const { aggregator } = (await request(admin + '/metering/status')).json();
  return aggregator !== null && aggregator.node_id === (await request(admin + '/')).json().node_id;
}

/**
 * A topology whose aggregator can be stopped: `api` reaches a process that does not aggregate, `aggregator`
 * is the pid of the one that does (stopped with SIGSTOP, resumed with SIGCONT).
 */
export interface StoppableAggregator {
  api: MeteringApi;
  aggregator: number;
}

/** An aggregator that stops: the backlog of acknowledged events is bounded, and all of them are counted once it resumes. */
export async function backlogIsBounded(start: (queueMaxEvents: number) => Promise<StoppableAggregator>): Promise<void> {
  const queueMaxEvents = 20;
  const { api, aggregator } = await start(queueMaxEvents);
  const events = makeEvents('stalled', 400);
  const acknowledged: Record<string, any>[] = [];
  const refusals: string[] = [];
  process.kill(aggregator, 'SIGSTOP');
  try {
    // Sent one after the other to a process that does not aggregate: nothing counts them meanwhile.
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
}

/**
 * An aggregator that stops: ingest is refused once an acknowledged event has waited MAX_LAG_MS, though
 * few wait; all are counted once it resumes.
 */
export async function lagIsBounded(start: (queueMaxEvents: number) => Promise<StoppableAggregator>): Promise<void> {
  const { api, aggregator } = await start(100_000);
  // More than the bound lets through at a batch every 25 ms or so; it refuses before another process
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
}
