/**
 * OpenMeter's v1 API driven by the real `@openmeter/sdk`, unmodified, with the metering
 * route's URL as its base URL and a gateway token as its API key: meters created, listed, read, queried
 * (GET and POST, windows, subject and dimension filters, group by) and deleted; events ingested (the SDK
 * fills ids, sources and times) and listed; subjects listed; errors as RFC 7807 problems the SDK reads.
 * The same meters, events and usage answer on the v3 paths.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { HTTPError, type OpenMeter } from '@openmeter/sdk';
import { startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { meteringConfig, MeteringApi } from './catalogue-support.ts';
import { closeSdkClients, sdkClient } from './openmeter-sdk-support.ts';

let gw: TestGateway;
let v3: MeteringApi;
let client: OpenMeter;
before(async () => {
  gw = await startGateway(meteringConfig());
  v3 = await MeteringApi.connect(gw.https);
  client = sdkClient(gw.https, v3.token);
});
after(async () => {
  await gw.stop();
  await closeSdkClients();
});

const hour = (h: number) => new Date(Date.UTC(2026, 10, 20, h, 15));

test('meters: create, list, get, on both APIs', async () => {
  const meter = (await client.meters.create({ slug: 'tokens', eventType: 'prompt', aggregation: 'SUM', valueProperty: '$.tokens', groupBy: { model: '$.model' } }))!;
  assert.equal(meter.slug, 'tokens');
  assert.equal(meter.name, 'tokens', 'named after its slug');
  assert.equal(meter.aggregation, 'SUM');
  assert.deepEqual(meter.groupBy, { model: '$.model' });
  assert.ok(meter.createdAt instanceof Date, 'times are ISO date-times');
  assert.deepEqual((await client.meters.list())!.map((m) => m.slug), ['tokens']);
  assert.equal((await client.meters.get(meter.id))!.slug, 'tokens');
  const viaV3 = (await v3.getMeter('tokens')).json();
  assert.equal(viaV3.id, meter.id);
  assert.equal(viaV3.aggregation, 'sum');
});

test('events: ingested by the SDK, listed, and counted by queries on both APIs', async () => {
  await client.events.ingest([
    { type: 'prompt', subject: 'customer-1', time: hour(10), data: { tokens: 10, model: 'gpt-4' } },
    { type: 'prompt', subject: 'customer-1', time: hour(11), data: { tokens: '5', model: 'gpt-4o' } },
    { type: 'prompt', subject: 'customer-2', time: hour(11), data: { tokens: 7, model: 'gpt-4' } },
  ]);
  const listed = (await client.events.list({ subject: 'customer-1' }))!;
  assert.equal(listed.length, 2);
  assert.equal(listed[0].event.source, '@openmeter/sdk');
  assert.ok(listed[0].ingestedAt instanceof Date);

  const v2 = (await client.events.listV2({ filter: JSON.stringify({ subject: { $eq: 'customer-1' }, time: { $gte: hour(11).toISOString() } }), limit: 1 } as any))!;
  assert.deepEqual(v2.items.map((i) => i.event.subject), ['customer-1']);
  assert.equal(v2.items[0].event.time!.toISOString(), hour(11).toISOString());
  const rest = (await client.events.listV2({ filter: JSON.stringify({ subject: { $eq: 'customer-1' } }), limit: 1, cursor: (v2 as any).nextCursor } as any))!;
  assert.equal(rest.items[0].event.time!.toISOString(), hour(10).toISOString(), 'the next page');
  const refused = await client.events.listV2({ filter: JSON.stringify({ subject: { $like: 'c%' } }) } as any).catch((e) => e);
  assert.equal(refused.status, 400);

  const total = await client.meters.query('tokens', {});
  assert.equal(total.data.length, 1);
  assert.equal(total.data[0].value, 22);
  assert.equal(total.data[0].subject, null);

  const hourly = await client.meters.query('tokens', { windowSize: 'HOUR', from: hour(0), to: hour(23), subject: ['customer-1'], groupBy: ['model'] });
  assert.deepEqual(
    hourly.data.map((r) => [r.windowStart.toISOString(), r.windowEnd.toISOString(), r.subject, r.groupBy, r.value]),
    [
      ['2026-11-20T10:00:00.000Z', '2026-11-20T11:00:00.000Z', 'customer-1', { model: 'gpt-4' }, 10],
      ['2026-11-20T11:00:00.000Z', '2026-11-20T12:00:00.000Z', 'customer-1', { model: 'gpt-4o' }, 5],
    ],
  );
  const filtered = (await client.meters.queryPost('tokens', { filterGroupBy: { model: ['gpt-4'] }, groupBy: ['subject'] })) as { data: { subject: string; value: number }[] };
  assert.deepEqual(filtered.data.map((r) => [r.subject, r.value]).sort(), [['customer-1', 10], ['customer-2', 7]]);
  const viaGet = await client.meters.query('tokens', { filterGroupBy: { model: 'gpt-4' } } as any);
  assert.equal(viaGet.data[0].value, 17, 'deepObject filters on GET');
  const sameOnV3 = await v3.queryOk('tokens', { group_by_dimensions: ['subject', 'model'] });
  assert.equal(sameOnV3.data.reduce((n, r) => n + Number(r.value), 0), 22);
  assert.deepEqual((await client.subjects.list())!.map((s) => s.key), ['customer-1', 'customer-2']);
});

test('meters: the values of a group-by, within from and to', async () => {
  assert.deepEqual(await client.meters.listGroupByValues('tokens', 'model', { from: hour(0), to: hour(23) }), ['gpt-4', 'gpt-4o']);
  assert.deepEqual(await client.meters.listGroupByValues('tokens', 'model', { from: hour(11), to: hour(23) }), ['gpt-4', 'gpt-4o']);
  assert.deepEqual(await client.meters.listGroupByValues('tokens', 'model', { from: hour(10), to: hour(11) }), ['gpt-4']);
  assert.deepEqual(await client.meters.listGroupByValues('tokens', 'model'), [], 'the last 24 hours by default: the events are of another day');
  const unknown = await client.meters.listGroupByValues('tokens', 'nope', { from: hour(0) }).catch((e) => e);
  assert.equal(unknown.status, 400);
});

test('errors are problems the SDK reads', async () => {
  const err = await client.meters.create({ slug: 'Bad Slug', eventType: 'x', aggregation: 'COUNT' }).catch((e) => e);
  assert.ok(err instanceof HTTPError, String(err));
  assert.equal(err.status, 400);
  assert.equal(err.title, 'Bad Request');
  assert.match(err.message, /slug/);
  const missing = await client.meters.get('nope').catch((e) => e);
  assert.equal(missing.status, 404);
  const invalid = await client.meters.query('tokens', { groupBy: ['nope'] }).catch((e) => e);
  assert.equal(invalid.status, 400);
  assert.match(invalid.message, /invalid group by: nope/);
});

test('meters: deleted through the SDK, gone from both APIs', async () => {
  await client.meters.delete('tokens');
  assert.deepEqual(await client.meters.list(), []);
  assert.equal((await v3.listMeters()).json().data.length, 0);
});
