/**
 * Request metering: what `metering-and-billing` costs on the proxy path, in req/s and CPU per request
 * against the same route without it (best of 3 alternating rounds, 50 keep-alive connections):
 * - local: events into the gateway's own metering store (Kong's default queue settings); aim ≥ 0.85;
 * - remote: events to a second Tollgate's metering route through the on-disk queue (batches of 1000,
 *   concurrency_limit -1: settings for an endpoint that takes thousands of events a second);
 *   aim ≥ 0.8. The queue's drops after the run are printed: a queue that cannot keep up would show there.
 * The subject comes from a header, so no authentication plugin is part of the measure.
 *
 * Collectors: ingest through a collector with a small mapping (one derived field) against the same
 * ingest without it, in events/s, single events and batches of 100 (two gateways, alternating rounds);
 * aim ≥ 0.6.
 */
import { request } from '../test/helpers/gateway.ts';
import { load, printTable, startChild, type LoadResult } from './lib.ts';
import { METERING, batchBodies, drive, meteringRoute, startProxyCostGateway } from './metering.ts';
import { startTollgate } from './proxy.ts';

const HEADERS = { 'x-customer': 'bench-customer' };

const subject = { look_up_value_in: 'header', field: 'x-customer' };

/** A series of the admin API's /metrics, summed over its label sets. */
async function metric(admin: string, name: string): Promise<number> {
  const text = (await request(`${admin}/metrics`)).text;
  return text.split('\n').filter((l) => l.startsWith(name)).reduce((n, l) => n + Number(l.split(' ').pop()), 0);
}

async function proxyCost(): Promise<void> {
  const upstream = await startChild('servers/upstream.ts');
  const receiver = await startTollgate({ gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], access_log: false }, routes: [meteringRoute()] }, 2);
  const tollgate = await startProxyCostGateway(
    upstream.urls[0],
    [
      { name: 'local', paths: ['/local'], plugins: [{ name: 'metering-and-billing', config: { subject } }] },
      {
        name: 'remote',
        paths: ['/remote'],
        plugins: [{ name: 'metering-and-billing', config: { subject, ingest_endpoint: `${receiver.urls[0]}${METERING}/events`, api_token: 'bench', queue: { max_batch_size: 1000, concurrency_limit: -1 } } }],
      },
    ],
    [{ key: 'requests', name: 'Requests', event_type: 'kong.api_request', aggregation: 'count', dimensions: { route: '$.route_name' } }],
  );
  const base = tollgate.urls[0];
  const admin = tollgate.urls[1];
  try {
    const pid = tollgate.process.pid;
    const rounds: LoadResult[][] = [];
    for (let round = 0; round < 3; round++) {
      const results = [];
      for (const path of ['/open', '/local', '/remote']) results.push(await load({ url: `${base}${path}/hello`, headers: HEADERS, pid }));
      rounds.push(results);
    }
    const best = (i: number) => rounds.map((r) => r[i]).reduce((a, b) => (b.requestsPerSecond > a.requestsPerSecond ? b : a));
    const rows: [string, LoadResult][] = [
      ['same route shape, no plugin', best(0)],
      ['metering-and-billing, local store (aim ≥ 0.85)', best(1)],
      ['metering-and-billing, remote Tollgate (aim ≥ 0.8)', best(2)],
    ];
    printTable('metering-and-billing: proxied GET, 50 keep-alive connections, 5 s, best of 3 alternating rounds (ratio to the route without plugin)', rows, rows[0][1]);
    for (const [i, name] of [[1, 'local'], [2, 'remote']] as const) {
      const added = rounds.map((r) => r[i].cpuPerRequest! - r[0].cpuPerRequest!);
      console.log(`CPU added per request, ${name}, per round: ${added.map((a) => `${a.toFixed(1)} µs`).join(', ')}`);
    }
    // Let the remote queue drain, then show what it dropped (nothing, when it keeps up).
    for (let i = 0; i < 100 && (await metric(admin, 'tollgate_request_metering_queue_events')) > 0; i++) await new Promise((r) => setTimeout(r, 100));
    console.log(`request metering after the runs: ${await metric(admin, 'tollgate_request_metering_dropped_events_total')} events dropped, ${await metric(admin, 'tollgate_request_metering_queue_events')} still queued, ${await metric(admin, 'tollgate_request_metering_deliveries_total')} batches handed over`);
  } finally {
    await Promise.all([upstream.stop(), tollgate.stop(), receiver.stop()]);
  }
}

const SMALL_MAPPING = '$merge([$, {"data": $merge([data, {"kilobytes": data.bytes / 1024}])}])';

async function collectorCost(): Promise<void> {
  const gateway = (collectors: Record<string, unknown>[]) =>
    startTollgate(
      {
        gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], access_log: false, log_level: 'warn' },
        routes: [meteringRoute()],
        meters: [{ key: 'kilobytes', name: 'Kilobytes', event_type: 'request', aggregation: 'sum', value_property: '$.bytes' }],
        collectors,
      },
      2,
    );
  const plain = await gateway([]);
  const collected = await gateway([{ name: 'kilobytes', match: { type: 'request' }, mapping: SMALL_MAPPING }]);
  try {
    console.log(`\n## collectors: ingest through a collector with a small mapping against the same ingest without it (events/s, 2 rounds of 3 s each, alternating; aim ≥ 0.6)`);
    console.log('| events per request | without collector | with collector | ratio |');
    console.log('|---|---|---|---|');
    for (const [size, workers] of [[1, 32], [100, 8]] as const) {
      let without = 0;
      let withCollector = 0;
      for (let round = 0; round < 2; round++) {
        without += (await drive(`${plain.urls[0]}${METERING}/events`, workers, 'application/cloudevents-batch+json', batchBodies(size), 3)).rps * size;
        withCollector += (await drive(`${collected.urls[0]}${METERING}/events`, workers, 'application/cloudevents-batch+json', batchBodies(size), 3)).rps * size;
      }
      console.log(`| ${size} | ${Math.round(without / 2)} | ${Math.round(withCollector / 2)} | ${(withCollector / without).toFixed(2)} |`);
    }
  } finally {
    await Promise.all([plain.stop(), collected.stop()]);
  }
}

export async function run(): Promise<void> {
  await proxyCost();
  await collectorCost();
}
