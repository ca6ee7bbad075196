/**
 * Billing: what `entitlement-enforcement` costs on the proxy path (req/s and CPU per request with the
 * plugin against the same route without it; aim ≥ 0.9), and the latency of a customer's upcoming
 * invoice with a year of usage on 5 rate cards (aim p50 < 50 ms).
 *
 * The enforced route identifies the customer by a header, so no authentication plugin is measured; the
 * customer's metered limit is high enough that every request passes and carries the usage headers.
 * The year of usage is seeded through the plugin's own services (same writer, same aggregates) with a
 * subscription created as of a year ago; the invoice is then read through HTTP from a gateway child.
 */
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { request, tempDir } from '../test/helpers/gateway.ts';
import { Billing } from '../plugins/metering/billing/billing.ts';
import { parsePlan } from '../plugins/metering/billing/productcatalog/plan-model.ts';
import { prepareEvents } from '../plugins/metering/ingest/events.ts';
import { meterDefinitionFrom } from '../plugins/metering/meter/meter-model.ts';
import { MeteringService } from '../plugins/metering/service.ts';
import { MeterUsage } from '../plugins/metering/query/usage.ts';
import type { MeteringConfig } from '../plugins/metering/schema.ts';
import { LevelStore } from '../src/store/level.ts';
import { load, printTable, startChild, type LoadResult } from './lib.ts';
import { METERING, meteringRoute, startProxyCostGateway } from './metering.ts';
import { startTollgate } from './proxy.ts';

const CARDS = 5;
const YEAR_MS = 365 * 86_400_000;
/** One event per meter every 15 minutes for a year: 35,040 per meter, 175,200 in all. */
const EVENT_EVERY_MS = 15 * 60_000;
const INVOICE_READS = 50;

async function call(base: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await request(`${base}${METERING}${path}`, { method, body: body as Record<string, unknown> | undefined });
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
  return res.text ? res.json() : undefined;
}

async function enforcementCost(): Promise<void> {
  const upstream = await startChild('servers/upstream.ts');
  const enforced = { feature: { key: 'calls' }, customer: { look_up_value_in: 'header', field: 'x-customer' } };
  const tollgate = await startProxyCostGateway(
    upstream.urls[0],
    [{ name: 'enforced', paths: ['/enforced'], plugins: [{ name: 'entitlement-enforcement', config: enforced }] }],
    [{ key: 'calls', name: 'Calls', event_type: 'request', aggregation: 'count' }],
  );
  const base = tollgate.urls[0];
  try {
    await call(base, 'POST', '/features', { key: 'calls', name: 'Calls', meter: { key: 'calls' } });
    const plan = await call(base, 'POST', '/plans', {
      key: 'bench', name: 'Bench', currency: 'USD', billing_cadence: 'P1M',
      phases: [{ key: 'main', name: 'Main', duration: null, rate_cards: [{ key: 'calls', name: 'Calls', feature_key: 'calls', price: { type: 'unit', amount: '0.001' }, entitlement: { type: 'metered', limit: '1000000000000' } }] }],
    });
    await call(base, 'POST', `/plans/${plan.id}/publish`);
    await call(base, 'POST', '/customers', { key: 'bench-customer', name: 'Bench customer' });
    await call(base, 'POST', '/subscriptions', { customer: { key: 'bench-customer' }, plan: { key: 'bench' } });
    const headers = { 'x-customer': 'bench-customer' };
    for (let i = 0; i < 100; i++) {
      const res = await request(`${base}/enforced/hello`, { headers });
      if (res.status === 200 && res.headers['x-usage-limit']) break;
      if (i === 99) throw new Error(`enforced route answers ${res.status}: ${res.text}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    // Alternating rounds, best of each: the load generator, the upstream and the gateway share 2 cores.
    const pid = tollgate.process.pid;
    const rounds: [LoadResult, LoadResult][] = [];
    for (let round = 0; round < 3; round++) {
      rounds.push([await load({ url: `${base}/open/hello`, headers, pid }), await load({ url: `${base}/enforced/hello`, headers, pid })]);
    }
    const best = (i: 0 | 1) => rounds.map((r) => r[i]).reduce((a, b) => (b.requestsPerSecond > a.requestsPerSecond ? b : a));
    const rows: [string, LoadResult][] = [['same route shape, no plugin', best(0)], ['entitlement-enforcement (metered, allowed)', best(1)]];
    printTable('entitlement-enforcement: proxied GET, 50 keep-alive connections, 5 s, best of 3 alternating rounds (ratio to the route without plugin; aim ≥ 0.9)', rows, rows[0][1]);
    const added = rounds.map(([open, enforcedRound]) => enforcedRound.cpuPerRequest! - open.cpuPerRequest!);
    console.log(`CPU added per request by the plugin, per round: ${added.map((a) => `${a.toFixed(1)} µs`).join(', ')}`);
  } finally {
    await Promise.all([upstream.stop(), tollgate.stop()]);
  }
}

/** A customer subscribed for a year (as of a year ago) to a P1Y plan of 5 usage rate cards, with a year of events. */
async function seedYear(dataDir: string): Promise<number> {
  const store = new LevelStore(join(dataDir, 'store'));
  await store.open();
  const log = pino({ level: 'silent' });
  const service = new MeteringService({ store: store.namespace('plugin.metering'), log });
  await service.open();
  const billing = new Billing(store.namespace('plugin.metering').namespace('billing'), new MeterUsage(service), log);
  const cards = [];
  for (let i = 0; i < CARDS; i++) {
    await service.catalogue.createMeter(meterDefinitionFrom({ key: `usage_${i}`, event_type: `usage_${i}`, aggregation: 'sum', value_property: '$.units', dimensions: { region: '$.region' } }));
    await billing.features.create({ key: `feature_${i}`, name: `Feature ${i}`, description: null, labels: {}, meter: { idOrKey: `usage_${i}`, filters: i % 2 ? { region: { eq: 'eu' } } : {} } });
    const price = i % 2 === 0
      ? { type: 'unit', amount: '0.0125' }
      : { type: 'graduated', tiers: [{ up_to_amount: '1000', unit_price: { amount: '0.02' } }, { up_to_amount: '100000', unit_price: { amount: '0.01' } }, { unit_price: { amount: '0.005' } }] };
    const entitlement = i === 0 ? { entitlement: { type: 'metered', limit: '1000000000', usage_period: 'P1M' } } : {};
    cards.push({ key: `feature_${i}`, name: `Feature ${i}`, feature_key: `feature_${i}`, price, ...entitlement });
  }
  const start = Date.now() - YEAR_MS + 86_400_000;
  const plan = await billing.plans.create(parsePlan({ key: 'yearly', name: 'Yearly', currency: 'USD', billing_cadence: 'P1Y', phases: [{ key: 'main', name: 'Main', duration: null, rate_cards: cards }] }).definition!);
  // Billing's clock seam: the plan published and the subscription created a year ago (the API always uses now).
  await billing.plans.publish(plan.id, 'api', start - 1000);
  await billing.customers.create({ key: 'year-customer', name: 'Year customer', description: null, labels: {}, usage_attribution: { subject_keys: ['app-1', 'app-2'] }, currency: null, primary_email: null });
  await billing.subscriptions.create({ key: 'year-customer' }, { key: 'yearly' }, undefined, start);
  let events = 0;
  const config = { queue_max_events: 1_000_000 } as MeteringConfig;
  for (let i = 0; i < CARDS; i++) {
    let batch: Record<string, unknown>[] = [];
    for (let t = start + 1000; t < Date.now(); t += EVENT_EVERY_MS) {
      batch.push({ specversion: '1.0', id: randomUUID(), source: 'seed', type: `usage_${i}`, subject: events % 2 ? 'app-1' : 'app-2', time: new Date(t).toISOString(), data: { units: `${(events % 7) + 0.5}`, region: events % 3 ? 'eu' : 'us' } });
      events++;
      if (batch.length === 5_000) {
        await service.ingest(prepareEvents(batch, true, { now: Date.now(), retentionStart: 0, retentionDays: 36_500 }), config);
        batch = [];
      }
    }
    if (batch.length) await service.ingest(prepareEvents(batch, true, { now: Date.now(), retentionStart: 0, retentionDays: 36_500 }), config);
  }
  await decisionCost(billing);
  await service.close();
  await store.close();
  return events;
}

/** The enforcement's decision alone, in process: what the plugin adds to a request besides its header work. */
async function decisionCost(billing: Billing): Promise<void> {
  await billing.access.start();
  const identifiers = [undefined, 'app-1'];
  const rounds = 2_000_000;
  let allowed = 0;
  const started = performance.now();
  for (let i = 0; i < rounds; i++) {
    const admission = billing.access.admit(identifiers, 'feature_0', Date.now());
    if (admission instanceof Promise) throw new Error('one process decides without a promise');
    if (admission.decision.kind === 'allowed') allowed++;
    // Nothing was metered: the reservation is given back, as a request refused after the decision.
    admission.reservation?.settle();
  }
  const ns = ((performance.now() - started) * 1e6) / rounds;
  billing.access.stop();
  if (allowed !== rounds) throw new Error('the seeded customer should have access');
  console.log(`\nentitlement decision in process (AccessCache.admit and its settlement, metered feature, ${rounds} calls): ${ns.toFixed(0)} ns per request`);
}

async function upcomingInvoiceLatency(): Promise<void> {
  const dataDir = join(tempDir('tollgate-bench-billing-'), 'data');
  const seeded = performance.now();
  const events = await seedYear(dataDir);
  const seedSeconds = (performance.now() - seeded) / 1000;
  const tollgate = await startTollgate({ gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], data_dir: dataDir, access_log: false }, routes: [meteringRoute()] }, 2);
  try {
    const url = `${tollgate.urls[0]}${METERING}/customers/year-customer/upcoming-invoice`;
    const timings: number[] = [];
    let invoice: any;
    for (let i = 0; i < INVOICE_READS + 5; i++) {
      const started = performance.now();
      const res = await request(url);
      const ms = performance.now() - started;
      if (res.status !== 200) throw new Error(`upcoming invoice: ${res.status} ${res.text}`);
      invoice = res.json();
      if (i >= 5) timings.push(ms);
    }
    timings.sort((a, b) => a - b);
    const at = (q: number) => timings[Math.min(timings.length - 1, Math.floor(q * timings.length))].toFixed(1);
    console.log(`\n## billing: upcoming invoice of a customer with a year of usage on ${CARDS} rate cards (aim p50 < 50 ms)`);
    console.log(`| events in the period | lines | total | p50 ms | p99 ms | max ms |`);
    console.log(`|---|---|---|---|---|---|`);
    console.log(`| ${events} | ${invoice.lines.length} | ${invoice.totals.total} | ${at(0.5)} | ${at(0.99)} | ${timings[timings.length - 1].toFixed(1)} |`);
    console.log(`(seeded in ${seedSeconds.toFixed(1)} s; ${INVOICE_READS} sequential reads over HTTP after 5 warm-up reads)`);
  } finally {
    await tollgate.stop();
  }
}

export async function run(): Promise<void> {
  await enforcementCost();
  await upcomingInvoiceLatency();
}
