/**
 * The money path: what metering, billing and a hard limit cost on the proxy path.
 *
 * - Throughput: a route with key-auth + entitlement-enforcement (a metered hard limit, never reached) +
 *   metering-and-billing (into this gateway's store) against the same route with key-auth only, in
 *   alternating rounds of the same run, 50 keep-alive connections; aim ≥ 0.85. Once on one process, once on
 *   a node of 2 workers (the default on 2 cores), where every hard-limit decision is a round trip to the
 *   primary's admission counter.
 * - Latency of the shared reservation, on 2 workers: one request at a time through the same plugins, the
 *   feature once metered with a hard limit (reserved in the primary) and once a boolean entitlement (decided
 *   in the worker's memory); the difference at p50/p99 is what the reservation adds.
 */
import { request } from '../test/helpers/gateway.ts';
import { load, printTable, startChild, type Child, type LoadResult } from './lib.ts';
import { METERING, meteringRoute } from './metering.ts';
import { startTollgate } from './proxy.ts';

const KEY = { apikey: 'bench-key-0123456789' };
const ROUNDS = 3;
const SEQUENTIAL_REQUESTS = 3_000;

function routes(): Record<string, unknown>[] {
  const billed = (name: string, feature: string) => ({
    name,
    paths: [`/${name}`],
    plugins: [
      { name: 'key-auth', config: {} },
      { name: 'entitlement-enforcement', config: { feature: { key: feature } } },
      { name: 'metering-and-billing', config: {} },
    ],
  });
  return [{ name: 'keyauth', paths: ['/keyauth'], plugins: [{ name: 'key-auth', config: {} }] }, billed('metered', 'calls'), billed('flagged', 'beta')];
}

/** A gateway whose consumer `bench` is subscribed to a plan with a hard limit it never reaches and a boolean feature. */
async function billedGateway(upstream: string, workers: number): Promise<Child> {
  const tollgate = await startTollgate(
    {
      gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], access_log: false, worker_processes: workers },
      services: [{ name: 'bench', url: upstream, routes: routes() }],
      routes: [meteringRoute()],
      consumers: [{ username: 'bench', keyauth_credentials: [{ key: KEY.apikey }] }],
      meters: [{ key: 'requests', name: 'Requests', event_type: 'kong.api_request', aggregation: 'count' }],
      features: [
        { key: 'calls', name: 'Calls', meter: { key: 'requests' } },
        { key: 'beta', name: 'Beta' },
      ],
      plans: [
        {
          key: 'bench',
          name: 'Bench',
          currency: 'USD',
          billing_cadence: 'P1M',
          phases: [
            {
              key: 'main',
              name: 'Main',
              duration: null,
              rate_cards: [
                { key: 'calls', name: 'Calls', feature_key: 'calls', billing_cadence: 'P1M', price: { type: 'unit', amount: '0.001' }, entitlement: { type: 'metered', limit: '1000000000', usage_period: 'P1M' } },
                { key: 'beta', name: 'Beta', feature_key: 'beta', billing_cadence: 'P1M', price: { type: 'free' }, entitlement: { type: 'boolean' } },
              ],
            },
          ],
        },
      ],
    },
    2,
  );
  const base = `${tollgate.urls[0]}${METERING}`;
  const post = async (path: string, body: unknown) => {
    const res = await request(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    if (res.status >= 300) throw new Error(`${path}: ${res.status} ${res.text}`);
  };
  await post('/customers', { key: 'bench-customer', name: 'Bench', usage_attribution: { subject_keys: ['bench'] } });
  await post('/subscriptions', { customer: { key: 'bench-customer' }, plan: { key: 'bench' } });
  // Every worker serves the subscription before the runs start.
  for (let i = 0; i < 20; i++) {
    const answers = await Promise.all(Array.from({ length: 8 }, () => request(`${tollgate.urls[0]}/metered/x`, { headers: KEY })));
    if (answers.every((r) => r.status === 200)) return tollgate;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error('the subscription never reached every worker');
}

async function throughput(upstream: string, workers: number): Promise<void> {
  const tollgate = await billedGateway(upstream, workers);
  try {
    const pid = tollgate.process.pid;
    const rounds: LoadResult[][] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const results = [];
      for (const path of ['/keyauth', '/metered']) results.push(await load({ url: `${tollgate.urls[0]}${path}/hello`, headers: KEY, pid }));
      rounds.push(results);
    }
    const median = (i: number) => rounds.map((r) => r[i]).sort((a, b) => a.requestsPerSecond - b.requestsPerSecond)[Math.floor(ROUNDS / 2)];
    const ratios = rounds.map((r) => (r[1].requestsPerSecond / r[0].requestsPerSecond).toFixed(2));
    printTable(
      `money path on ${workers === 1 ? 'one process' : `${workers} workers`}: key-auth + entitlement-enforcement (metered hard limit) + metering-and-billing against key-auth only, 50 connections, median of ${ROUNDS} alternating rounds (aim ≥ 0.85)`,
      [
        ['key-auth only', median(0)],
        ['key-auth + entitlement + metering', median(1)],
      ],
      median(0),
    );
    console.log(`ratio per round: ${ratios.join(', ')}; CPU added per request: ${rounds.map((r) => `${(r[1].cpuPerRequest! - r[0].cpuPerRequest!).toFixed(1)} µs`).join(', ')}`);
  } finally {
    await tollgate.stop();
  }
}

/** Milliseconds of `count` requests sent one after the other. */
async function sequential(url: string, count: number): Promise<number[]> {
  const timings: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    const res = await request(url, { headers: KEY });
    if (res.status !== 200) throw new Error(`${url}: ${res.status} ${res.text}`);
    timings.push(performance.now() - started);
  }
  return timings.sort((a, b) => a - b);
}

async function reservationLatency(upstream: string): Promise<void> {
  const tollgate = await billedGateway(upstream, 2);
  try {
    const at = (t: number[], q: number) => t[Math.min(t.length - 1, Math.floor(q * t.length))];
    const metered: number[][] = [];
    const flagged: number[][] = [];
    for (let round = 0; round < ROUNDS; round++) {
      metered.push(await sequential(`${tollgate.urls[0]}/metered/x`, SEQUENTIAL_REQUESTS / ROUNDS));
      flagged.push(await sequential(`${tollgate.urls[0]}/flagged/x`, SEQUENTIAL_REQUESTS / ROUNDS));
    }
    const all = (runs: number[][]) => runs.flat().sort((a, b) => a - b);
    const [m, f] = [all(metered), all(flagged)];
    console.log(`\n## hard-limit decisions on 2 workers: one request at a time, ${SEQUENTIAL_REQUESTS} each, alternating (ms, client-side)`);
    console.log('| feature | p50 | p99 |');
    console.log('|---|---|---|');
    console.log(`| boolean entitlement (decided in the worker) | ${at(f, 0.5).toFixed(3)} | ${at(f, 0.99).toFixed(3)} |`);
    console.log(`| metered hard limit (reserved in the primary) | ${at(m, 0.5).toFixed(3)} | ${at(m, 0.99).toFixed(3)} |`);
    console.log(`| added by the shared reservation | ${(at(m, 0.5) - at(f, 0.5)).toFixed(3)} | ${(at(m, 0.99) - at(f, 0.99)).toFixed(3)} |`);
  } finally {
    await tollgate.stop();
  }
}

export async function run(): Promise<void> {
  const upstream = await startChild('servers/upstream.ts');
  try {
    await throughput(upstream.urls[0], 1);
    await throughput(upstream.urls[0], 2);
    await reservationLatency(upstream.urls[0]);
  } finally {
    await upstream.stop();
  }
}
