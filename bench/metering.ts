/**
 * The metering plugin: ingest throughput with fsync (single-event requests, batches of 100 and 1000)
 * against the raw LevelDB rate for the same records (chained batches of the same keys and values, with
 * sync), and query latency (p50/p99) for a one-year range at day granularity over ≥ 1 million stored
 * events. The gateway runs as a child process; loads come from keep-alive HTTP/1.1 clients here.
 * The query data set is seeded through the plugin's own service (same writer, same aggregates) to save
 * time; the query itself is measured through HTTP.
 */
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { ClassicLevel } from 'classic-level';
import pino from 'pino';
import { stringify } from 'yaml';
import { tempDir } from '../test/helpers/gateway.ts';
import { LEVEL_OPTIONS, LevelStore } from '../src/store/level.ts';
import type { BatchOp } from '../src/store/store.ts';
import { prepareEvents } from '../plugins/metering/ingest/events.ts';
import { dedupeKey, eventKey, padSeq, SEQ_KEY, timeIndexValue, timeKey } from '../plugins/metering/shared/keys.ts';
import { addEvent, newDelta, writesIntoEmptySpace } from '../plugins/metering/aggregation/ledger.ts';
import { meterDefinitionFrom } from '../plugins/metering/meter/meter-model.ts';
import { MeteringService } from '../plugins/metering/service.ts';
import { GATEWAY_NODE_FLAGS, startChild, type Child } from './lib.ts';
import { startTollgate } from './proxy.ts';

/** Where the benches' gateways serve the metering plugin's API. */
export const METERING = '/v3/metering';
const SECONDS = 5;
const QUERY_EVENTS = 1_000_000;
const SUBJECTS = 20;
const METHODS = ['GET', 'POST', 'PUT'];

/** The metering plugin's API at METERING, open to callers without credentials (no authentication is measured). */
export function meteringRoute(): Record<string, unknown> {
  return { name: 'metering', paths: [METERING], strip_path: false, plugins: [{ name: 'metering', config: { allow_unauthenticated: true } }] };
}

/**
 * A Tollgate child for what a plugin costs on the proxy path: service `bench` on `upstreamUrl` with the baseline route
 * `/open` (no plugin) and the `measured` routes, the metering API (meteringRoute) with `meters`; no access log.
 */
export function startProxyCostGateway(upstreamUrl: string, measured: Record<string, unknown>[], meters: Record<string, unknown>[]): Promise<Child> {
  return startTollgate(
    {
      gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], access_log: false },
      services: [{ name: 'bench', url: upstreamUrl, routes: [{ name: 'open', paths: ['/open'] }, ...measured] }],
      routes: [meteringRoute()],
      meters,
    },
    2,
  );
}

function eventJson(i: number, time = new Date().toISOString(), id: string = randomUUID()): string {
  return `{"specversion":"1.0","id":"${id}","source":"bench","type":"request","subject":"customer-${i % SUBJECTS}","time":"${time}","data":{"method":"${METHODS[i % 3]}","route":"/orders","bytes":${(i % 997) + 1}}}`;
}

/**
 * Batch bodies of `size` events, each with ids never sent before. They are spliced from one template
 * with a counter, because the load generator shares the machine with the gateway: a thousand UUIDs
 * and JSON strings per request would take CPU that the gateway is being measured on.
 */
export function batchBodies(size: number): () => string {
  const run = randomUUID();
  const chunks = `[${Array.from({ length: size }, (_, i) => eventJson(i, undefined, `\u0000${i}`)).join(',')}]`.split('\u0000');
  let request = 0;
  return () => {
    const prefix = `${run}-${request++}-`;
    let body = chunks[0];
    for (let i = 1; i < chunks.length; i++) body += prefix + chunks[i];
    return body;
  };
}

/** The process models compared: the default (a worker per core, the primary owning LevelDB) and one process. */
const MODELS: { name: string; workers: 'auto' | 1 }[] = [
  { name: 'workers (auto, the default)', workers: 'auto' },
  { name: 'one process', workers: 1 },
];

async function startGatewayChild(dataDir: string, workers: 'auto' | 1): Promise<Child> {
  const dir = tempDir('tollgate-bench-metering-');
  const file = join(dir, 'gateway.yaml');
  writeFileSync(
    file,
    stringify({
      _format_version: '3.0',
      gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], data_dir: dataDir, log_level: 'warn', access_log: false, worker_processes: workers },
      routes: [{ name: 'metering', paths: [METERING], strip_path: false, plugins: [{ name: 'metering', config: { allow_unauthenticated: true, retention_days: 36_500, max_events_per_request: 10_000, queue_max_events: 1_000_000 } }] }],
      meters: [
        { key: 'requests', name: 'Requests', event_type: 'request', aggregation: 'count', dimensions: { method: '$.method' } },
        { key: 'bytes', name: 'Bytes', event_type: 'request', aggregation: 'sum', value_property: '$.bytes', dimensions: { route: '$.route' } },
      ],
    }),
  );
  const child = await startChild('../bin/tollgate.js', ['start', '--config', file], 2, GATEWAY_NODE_FLAGS);
  return child;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

function post(url: string, body: string, contentType: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': contentType, 'content-length': Buffer.byteLength(body) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** Posts bodies from `make` with `workers` in flight for `seconds`; returns requests/s and failures. */
export async function drive(
  url: string,
  workers: number,
  contentType: string,
  make: () => string,
  seconds = SECONDS,
): Promise<{ rps: number; failed: number }> {
  let done = 0;
  let failed = 0;
  const end = performance.now() + seconds * 1000;
  const start = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (performance.now() < end) {
        const res = await post(url, make(), contentType);
        if (res.status === 202) done++;
        else failed++;
      }
    }),
  );
  return { rps: done / ((performance.now() - start) / 1000), failed };
}

/** Raw LevelDB with the store's settings: the same three records per event (event, time index, dedupe key), chained batches with sync. */
class RawLevel {
  private readonly location = tempDir('tollgate-bench-raw-');
  private db = new ClassicLevel<string, string>(this.location, LEVEL_OPTIONS);
  private seq = 0;

  constructor(private readonly batchSize: number) {}

  open() {
    return this.db.open();
  }

  close() {
    return this.db.close();
  }

  /** Closes (which waits for LevelDB's background compaction) and reopens, so no work leaks into the next round. */
  async settle(): Promise<void> {
    await this.db.close();
    this.db = new ClassicLevel<string, string>(this.location, LEVEL_OPTIONS);
    await this.db.open();
  }

  /** Events per second written for `seconds`. */
  async rate(seconds: number): Promise<number> {
    const now = Date.now();
    const records = Array.from(
      { length: this.batchSize },
      (_, i) => prepareEvents([JSON.parse(eventJson(i))], false, { now, retentionStart: 0, retentionDays: 36_500 })[0],
    );
    let events = 0;
    const start = performance.now();
    const end = start + seconds * 1000;
    while (performance.now() < end) {
      const batch = this.db.batch();
      for (const e of records) {
        const seq = ++this.seq;
        batch.put('plugin.metering:' + eventKey(e.typeEscaped, seq), e.json);
        batch.put('plugin.metering:' + timeKey(e.record.time, seq), timeIndexValue(e.typeEscaped, e.dedupe, now));
        batch.put('plugin.metering:' + dedupeKey(e.dedupe + seq), padSeq(seq));
      }
      await batch.write({ sync: true });
      events += records.length;
    }
    return events / ((performance.now() - start) / 1000);
  }
}

/**
 * Batched ingest and the raw rate in alternating two-second rounds, so that both see the same
 * machine (shared machines vary by the second). Returns mean events/s of each.
 */
async function interleaved(url: string, batchSize: number, workers: number, rounds = 5): Promise<{ ingest: number; raw: number; failed: number }> {
  const raw = new RawLevel(batchSize);
  await raw.open();
  const bodies = batchBodies(batchSize);
  let ingest = 0;
  let rawTotal = 0;
  let failed = 0;
  try {
    for (let i = 0; i < rounds; i++) {
      rawTotal += await raw.rate(2);
      await raw.settle();
      const r = await drive(url, workers, 'application/cloudevents-batch+json', bodies, 2);
      ingest += r.rps * batchSize;
      failed += r.failed;
    }
  } finally {
    await raw.close();
  }
  return { ingest: ingest / rounds, raw: rawTotal / rounds, failed };
}

/**
 * One year of events written straight through the plugin's modules (event records, time index and
 * dedupe keys, aggregates computed by the same ledger code), unsynced, for a quick seed.
 */
export async function seedYear(dataDir: string): Promise<number> {
  const store = new LevelStore(join(dataDir, 'store'));
  await store.open();
  const space = store.namespace('plugin.metering');
  const service = new MeteringService({ store: space, log: pino({ level: 'silent' }) });
  await service.open();
  const created = await service.catalogue.createMeter(meterDefinitionFrom({ key: 'year_requests', name: 'Year', event_type: 'year', aggregation: 'count', dimensions: { method: '$.method' } }));
  const meter = service.meters.compiledOf(service.catalogue.find(created.id));
  await service.close();
  const yearStart = Date.UTC(new Date().getUTCFullYear() - 1, 0, 1);
  const step = (365 * 86_400_000) / QUERY_EVENTS;
  const started = performance.now();
  const delta = newDelta();
  let ops: BatchOp[] = [];
  const flush = async (force = false) => {
    if (ops.length < 50_000 && !force) return;
    await space.batch(ops);
    ops = [];
  };
  const storedAt = Date.now();
  for (let seq = 1; seq <= QUERY_EVENTS; seq++) {
    const [e] = prepareEvents(
      [{ specversion: '1.0', id: `y${seq}`, source: 'seed', type: 'year', subject: `customer-${seq % SUBJECTS}`, time: new Date(yearStart + seq * step).toISOString(), data: { method: METHODS[seq % 3] } }],
      false,
      { now: Date.now(), retentionStart: 0, retentionDays: 36_500 },
    );
    ops.push(
      { type: 'put', key: eventKey(e.typeEscaped, seq), value: e.json },
      { type: 'put', key: timeKey(e.record.time, seq), value: timeIndexValue(e.typeEscaped, e.dedupe, storedAt) },
      { type: 'put', key: dedupeKey(e.dedupe), value: padSeq(seq) },
    );
    addEvent(delta, meter, seq, e.record);
    await flush();
  }
  ops.push({ type: 'put', key: SEQ_KEY, value: padSeq(QUERY_EVENTS) });
  for (const op of writesIntoEmptySpace(delta)) {
    ops.push(op);
    await flush();
  }
  await flush(true);
  const seconds = (performance.now() - started) / 1000;
  await store.close();
  return QUERY_EVENTS / seconds;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function queryLatency(url: string, body: unknown, times = 100): Promise<{ p50: number; p99: number; rows: number }> {
  const json = JSON.stringify(body);
  let rows = 0;
  for (let i = 0; i < 5; i++) await post(url, json, 'application/json');
  const samples: number[] = [];
  for (let i = 0; i < times; i++) {
    const t = performance.now();
    const res = await post(url, json, 'application/json');
    samples.push(performance.now() - t);
    if (res.status !== 200) throw new Error(`query failed: ${res.status} ${res.text}`);
    rows = JSON.parse(res.text).data.length;
  }
  samples.sort((a, b) => a - b);
  return { p50: percentile(samples, 50), p99: percentile(samples, 99), rows };
}

interface IngestFigures {
  single: { rps: number; failed: number };
  b100: { ingest: number; raw: number; failed: number };
  b1000: { ingest: number; raw: number; failed: number };
}

async function measureIngest(workers: 'auto' | 1): Promise<IngestFigures> {
  const gateway = await startGatewayChild(tempDir('tollgate-bench-ingest-'), workers);
  const url = `${gateway.urls[0]}${METERING}/events`;
  try {
    const single = await drive(url, 64, 'application/cloudevents+json', () => eventJson(0));
    const b100 = await interleaved(url, 100, 16);
    const b1000 = await interleaved(url, 1000, 4);
    return { single, b100, b1000 };
  } finally {
    await gateway.stop();
  }
}

const QUERY_CASES = (year: number): [string, unknown][] => {
  const range = { from: `${year}-01-01T00:00:00Z`, to: `${year + 1}-01-01T00:00:00Z`, granularity: 'P1D' };
  return [
    ['one year, P1D, UTC', range],
    ['one year, P1D, UTC, group by subject', { ...range, group_by_dimensions: ['subject'] }],
    ['one year, P1D, America/Los_Angeles', { ...range, time_zone: 'America/Los_Angeles' }],
    ['one year, P1D, Asia/Kolkata', { ...range, time_zone: 'Asia/Kolkata' }],
    ['one year, P1M, UTC, filter method=GET', { ...range, granularity: 'P1M', filters: { dimensions: { method: { eq: 'GET' } } } }],
    ['one year total', { from: range.from, to: range.to }],
  ];
};

async function measureQueries(dataDir: string, workers: 'auto' | 1): Promise<{ p50: number; p99: number; rows: number }[]> {
  const gateway = await startGatewayChild(dataDir, workers);
  const url = `${gateway.urls[0]}${METERING}/meters/year_requests/query`;
  try {
    const cases = QUERY_CASES(new Date().getUTCFullYear() - 1);
    // Every case warms up first: the first one measured would otherwise pay for the cold caches of all.
    for (const [, body] of cases) for (let i = 0; i < 10; i++) await post(url, JSON.stringify(body), 'application/json');
    const out: { p50: number; p99: number; rows: number }[] = [];
    for (const [, body] of cases) out.push(await queryLatency(url, body));
    return out;
  } finally {
    await gateway.stop();
  }
}

export async function run(): Promise<void> {
  console.log('\n## metering: ingest with fsync (2 meters per event type: count + sum, with a dimension each), both process models');
  const ingest: IngestFigures[] = [];
  for (const model of MODELS) ingest.push(await measureIngest(model.workers));
  const peak = new RawLevel(10_000);
  await peak.open();
  const rawPeak = await peak.rate(3);
  await peak.close();
  console.log('| process model | load | events/s | raw LevelDB events/s, same batch size | ratio | failed |');
  console.log('|---|---|---|---|---|---|');
  MODELS.forEach((model, i) => {
    const { single, b100, b1000 } = ingest[i];
    console.log(`| ${model.name} | single-event requests, 64 in flight | ${Math.round(single.rps)} (= requests/s) | – | – | ${single.failed} |`);
    console.log(`| ${model.name} | batches of 100, 16 in flight | ${Math.round(b100.ingest)} | ${Math.round(b100.raw)} | ${(b100.ingest / b100.raw).toFixed(2)} | ${b100.failed} |`);
    console.log(`| ${model.name} | batches of 1000, 4 in flight | ${Math.round(b1000.ingest)} | ${Math.round(b1000.raw)} | ${(b1000.ingest / b1000.raw).toFixed(2)} | ${b1000.failed} |`);
  });
  console.log(`| – | raw LevelDB, batches of 10000 (peak) | – | ${Math.round(rawPeak)} | – | – |`);
  console.log('(raw = chained LevelDB batches of the same event, time-index and dedupe records, written with sync, in two-second');
  console.log(' rounds alternating with the ingest rounds; aim: ingest ≥ 0.6 of raw, 0.7 hoped. Concurrent requests share one fsync.)');

  const queryDir = tempDir('tollgate-bench-query-');
  const seedRate = await seedYear(queryDir);
  const figures: { p50: number; p99: number; rows: number }[][] = [];
  for (const model of MODELS) figures.push(await measureQueries(queryDir, model.workers));
  console.log(`\n## metering: query latency over ${QUERY_EVENTS.toLocaleString('en')} stored events spread over one year (${SUBJECTS} subjects × 3 methods; seeded directly at ${Math.round(seedRate)} events/s)`);
  console.log(`| query | rows | ${MODELS.map((m) => `${m.name} p50 / p99 ms`).join(' | ')} |`);
  console.log(`|---|---|${MODELS.map(() => '---|').join('')}`);
  QUERY_CASES(0).forEach(([name], i) => {
    console.log(`| ${name} | ${figures[0][i].rows} | ${figures.map((f) => `${f[i].p50.toFixed(1)} / ${f[i].p99.toFixed(1)}`).join(' | ')} |`);
  });
  console.log('(aim: one year at day granularity < 20 ms p50 in UTC, < 30 ms in any time zone)');
  agent.destroy();
}

if (import.meta.url === `file://${process.argv[1]}`) await run();
