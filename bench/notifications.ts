/**
 * Notifications: ingest (batches of 100 events of 20 subscribed customers) with 1,000 balance-threshold
 * rules configured against none, on the same gateway in alternating rounds (the rules are disabled for
 * the "none" rounds, so both see the same store); and the time from the request whose events cross a
 * threshold to the signed webhook's arrival at a local receiver, p50/p99. One gateway process (the
 * evaluator hears the writer's commits there), a child process as in production.
 */
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { stringify } from 'yaml';
import { tempDir } from '../test/helpers/gateway.ts';
import { inParallel } from '../test/plugins/metering/catalogue-support.ts';
import { GATEWAY_NODE_FLAGS, startChild } from './lib.ts';
import { batchBodies, drive, METERING } from './metering.ts';

const RULES = 1_000;
const CUSTOMERS = 20;
const ROUNDS = 2;
const SECONDS = 4;
const LATENCY_SAMPLES = 30;

async function api(base: string, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(`${base}${METERING}${path}`, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

/** A receiver that resolves a waiter when a delivery names its customer. */
function receiver(): Promise<{ url: string; arrival(customerKey: string): Promise<number>; close(): void }> {
  const waiting = new Map<string, (at: number) => void>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = performance.now();
      const key = JSON.parse(Buffer.concat(chunks).toString()).data?.customer?.key;
      waiting.get(key)?.(at);
      res.writeHead(204).end();
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
        arrival: (key) => new Promise((done) => waiting.set(key, done)),
        close: () => server.close(),
      }),
    ),
  );
}

async function subscribe(base: string, plan: string, key: string): Promise<void> {
  await api(base, 'POST', '/customers', { key, name: key });
  await api(base, 'POST', '/subscriptions', { customer: { key }, plan: { key: plan } });
}

async function publishPlan(base: string, key: string, feature: string, limit: string): Promise<void> {
  const card = { key: feature, name: feature, feature_key: feature, price: { type: 'unit', amount: '0.001' }, entitlement: { type: 'metered', limit, usage_period: 'P1M' } };
  const plan = await api(base, 'POST', '/plans', { key, name: key, currency: 'USD', billing_cadence: 'P1M', phases: [{ key: 'main', name: 'Main', duration: null, rate_cards: [card] }] });
  await api(base, 'POST', `/plans/${plan.id}/publish`);
}

export async function run(): Promise<void> {
  console.log(`\n## notifications: ingest with ${RULES} threshold rules against none; threshold to webhook latency`);
  const dir = tempDir('tollgate-bench-notify-');
  const file = join(dir, 'gateway.yaml');
  writeFileSync(
    file,
    stringify({
      _format_version: '3.0',
      gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], data_dir: join(dir, 'data'), log_level: 'warn', access_log: false, worker_processes: 1 },
      routes: [{ name: 'metering', paths: [METERING], strip_path: false, plugins: [{ name: 'metering', config: { allow_unauthenticated: true, max_events_per_request: 10_000 } }] }],
      meters: [
        { key: 'requests', name: 'Requests', event_type: 'request', aggregation: 'count' },
        { key: 'crossings', name: 'Crossings', event_type: 'crossing', aggregation: 'count' },
      ],
      features: [
        { key: 'requests', name: 'Requests', meter: { key: 'requests' } },
        { key: 'crossings', name: 'Crossings', meter: { key: 'crossings' } },
      ],
    }),
  );
  const gateway = await startChild('../bin/tollgate.js', ['start', '--config', file], 2, GATEWAY_NODE_FLAGS);
  const base = gateway.urls[0];
  const hooks = await receiver();
  try {
    // The ingest customers: batchBodies' subjects customer-0 … customer-19, with a limit never reached.
    await publishPlan(base, 'big', 'requests', '1000000000000');
    for (let i = 0; i < CUSTOMERS; i++) await subscribe(base, 'big', `customer-${i}`);
    const channel = await api(base, 'POST', '/api/v1/notification/channels', { type: 'WEBHOOK', name: 'bench', url: hooks.url });
    const thresholds = [{ value: 80, type: 'usage_percentage' }, { value: 100, type: 'usage_percentage' }];
    const rules: any[] = [];
    await inParallel([...Array(RULES).keys()], 32, async (i) => {
      rules.push(await api(base, 'POST', '/api/v1/notification/rules', { type: 'entitlements.balance.threshold', name: `r${i}`, channels: [channel.id], features: ['requests'], thresholds, disabled: true }));
    });
    const setRules = (disabled: boolean) =>
      inParallel(rules, 32, (r) => api(base, 'PUT', `/api/v1/notification/rules/${r.id}`, { type: r.type, name: r.name, channels: [channel.id], features: ['requests'], thresholds, disabled }));
    const url = `${base}${METERING}/events`;
    const bodies = batchBodies(100);
    await drive(url, 8, 'application/cloudevents-batch+json', bodies, 2);
    const none: number[] = [];
    const many: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      none.push((await drive(url, 8, 'application/cloudevents-batch+json', bodies, SECONDS)).rps * 100);
      await setRules(false);
      many.push((await drive(url, 8, 'application/cloudevents-batch+json', bodies, SECONDS)).rps * 100);
      await setRules(true);
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    console.log(`ingest, batches of 100, 8 in flight, events/s (rounds): no rules ${median(none).toFixed(0)} (${none.map((x) => x.toFixed(0)).join(', ')}); ` +
      `${RULES} rules ${median(many).toFixed(0)} (${many.map((x) => x.toFixed(0)).join(', ')}); ratio ${(median(many) / median(none)).toFixed(2)}`);

    // Latency: a customer with a limit of 10 gets 10 events in one request; the rule fires at 100 %.
    await publishPlan(base, 'ten', 'crossings', '10');
    await api(base, 'POST', '/api/v1/notification/rules', { type: 'entitlements.balance.threshold', name: 'ten', channels: [channel.id], features: ['crossings'], thresholds: [{ value: 100, type: 'usage_percentage' }] });
    const keys = Array.from({ length: LATENCY_SAMPLES }, (_, i) => `latency-${i}`);
    for (const key of keys) await subscribe(base, 'ten', key);
    // Usage counts from a subscription's first whole second.
    await new Promise((r) => setTimeout(r, 1_010));
    const samples: number[] = [];
    for (const key of keys) {
      const events = Array.from({ length: 10 }, (_, n) => ({ specversion: '1.0', id: `${key}-${n}`, source: 'bench', type: 'crossing', subject: key }));
      const arrival = hooks.arrival(key);
      const sent = performance.now();
      await api(base, 'POST', '/events', events);
      samples.push((await arrival) - sent);
    }
    samples.sort((a, b) => a - b);
    const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))].toFixed(1);
    console.log(`event crossing a threshold -> webhook arrival (${LATENCY_SAMPLES} crossings, ${RULES + 1} rules): p50 ${at(0.5)} ms, p99 ${at(0.99)} ms`);
  } finally {
    hooks.close();
    await gateway.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run();
