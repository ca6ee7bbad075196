/**
 * GET /metrics: what plugins register through the plugin API (counters, gauges read when scraped,
 * histograms) appears beside the core's series; the metering plugin's queue, dedupe filter and backfill
 * gauges show its state.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PluginDefinition } from '../../src/pdk/types.ts';
import { request, startGateway, startUpstream } from '../helpers/gateway.ts';
import { startWithRegistry, waitFor } from '../helpers/support.ts';

test('a plugin’s counter, histogram and scrape-time gauge appear on /metrics', async (t) => {
  let depth = 7;
  const counted: PluginDefinition = {
    name: 'counted',
    version: '1.0.0',
    priority: 10,
    configSchema: { type: 'record', fields: {} },
    create(api) {
      const answered = api.metrics.counter({ name: 'tollgate_counted_answers_total', help: 'Answers by kind', labelNames: ['kind'] });
      const sizes = api.metrics.histogram({ name: 'tollgate_counted_sizes', help: 'Sizes', buckets: [1, 10] });
      api.metrics.gauge({ name: 'tollgate_counted_depth', help: 'Depth now', read: () => [{ value: depth }] });
      assert.throws(() => api.metrics.counter({ name: 'other_total', help: 'x' }), /plugin metric names start with tollgate_/);
      return {
        access(ctx) {
          answered.inc({ kind: 'ok' });
          sizes.observe(5);
          ctx.respond(200, { ok: true });
        },
      };
    },
  };
  const gw = await startWithRegistry(
    { routes: [{ name: 'r', paths: ['/c'], plugins: [{ name: 'counted' }] }] },
    new Map([['counted', counted]]),
  );
  t.after(() => gw.stop());
  for (let i = 0; i < 2; i++) assert.equal((await request(`${gw.http}/c`)).status, 200);
  let text = (await request(`${gw.admin}/metrics`)).text;
  assert.match(text, /^tollgate_counted_answers_total\{kind="ok"\} 2$/m);
  assert.match(text, /^tollgate_counted_sizes_bucket\{le="1"\} 0$/m);
  assert.match(text, /^tollgate_counted_sizes_bucket\{le="10"\} 2$/m);
  assert.match(text, /^tollgate_counted_depth 7$/m);
  depth = 3;
  text = (await request(`${gw.admin}/metrics`)).text;
  assert.match(text, /^tollgate_counted_depth 3$/m, 'read again at each scrape');
});

test('metering shows its queue depth and dedupe filter size on /metrics', async (t) => {
  const gw = await startGateway({
    routes: [{ name: 'metering', paths: ['/v3/metering'], protocols: ['http'], strip_path: false, plugins: [{ name: 'metering', config: { allow_unauthenticated: true } }] }],
  });
  t.after(() => gw.stop());
  const metric = async (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec((await request(`${gw.admin}/metrics`)).text)?.[1]);
  // The filter loads in the background at start.
  await waitFor(async () => (await metric('tollgate_metering_dedupe_filter_bytes')) > 0, 'the dedupe filter to load');
  const events = [1, 2, 3].map((i) => ({ specversion: '1.0', id: `m-${i}`, source: 'metrics-test', type: 'request', subject: 'c1' }));
  const posted = await request(`${gw.http}/v3/metering/events`, { method: 'POST', body: events as any, headers: { 'content-type': 'application/cloudevents-batch+json' } });
  assert.equal(posted.status, 202, posted.text);
  assert.equal(await metric('tollgate_metering_dedupe_filter_hashes'), 3);
  assert.equal(await metric('tollgate_metering_queue_events'), 0, 'nothing waits once acknowledged');
  assert.ok((await metric('tollgate_metering_dedupe_filter_bytes')) >= 2 * 2 ** 20);
  assert.match((await request(`${gw.admin}/metrics`)).text, /^# TYPE tollgate_metering_backfill_progress_ratio gauge$/m);
});

test('GET /status/traffic gives the request counters as JSON: per route and service, per consumer, by status code', async (t) => {
  const upstream = await startUpstream((req, res) => res.writeHead(req.url?.includes('fail') ? 503 : 200).end());
  const gw = await startGateway({
    services: [{ name: 'shop', url: upstream.url, routes: [{ name: 'shop-route', paths: ['/shop'] }] }],
  });
  t.after(async () => {
    await gw.stop();
    await upstream.close();
  });
  for (const path of ['/shop/a', '/shop/b', '/shop/fail', '/nowhere']) await request(gw.http + path);
  const counts = (await request(`${gw.admin}/status/traffic`)).json();
  const shop = counts.routes.find((r: any) => r.route === 'shop-route');
  assert.equal(shop.service, 'shop');
  assert.deepEqual(shop.requests, { 200: 2, 503: 1 });
  assert.ok(shop.latency_ms_sum > 0);
  assert.deepEqual(counts.routes.find((r: any) => r.route === '').requests, { 404: 1 }, 'requests that matched no route');
  assert.deepEqual(counts.consumers, []);
  assert.equal(counts.pid, process.pid, 'the process that answered (the in-process gateway of this test)');
  assert.deepEqual(counts.processes, [process.pid], 'whose counts they sum');
});
