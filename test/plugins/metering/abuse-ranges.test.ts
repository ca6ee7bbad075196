/**
 * Hostile time ranges: the cost of a query must follow the stored data, not the width of the range. A
 * producer may send an event up to a year in the future and a reader may ask for 1970..9999;
 * neither may stall the gateway, whose single event loop also serves the proxy. A stalled gateway shows
 * as a timed-out test (the bound is three orders of magnitude above a normal answer); it is then killed.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { spawnGateway, type SpawnedGateway } from '../../helpers/gateway.ts';
import { crash, event, MeteringApi, meteringConfig } from './catalogue-support.ts';

let gateway: SpawnedGateway;
let api: MeteringApi;

before(async () => {
  gateway = await spawnGateway(meteringConfig({ meters: [{ key: 'far', name: 'Far', event_type: 'far', aggregation: 'count' }] }));
  api = await MeteringApi.connect(gateway.https);
  await api.ingestOk([event({ type: 'far' }), event({ type: 'far', time: new Date(Date.now() + 360 * 86_400_000).toISOString() })]);
});
after(() => gateway && crash(gateway));

const PROMPTLY = { timeout: 20_000 };

test('hour windows in a non-UTC zone over a history reaching a year ahead answer promptly', PROMPTLY, async () => {
  const result = await api.queryOk('far', { granularity: 'PT1H', time_zone: 'Asia/Kolkata' });
  assert.equal(result.data.length, 2);
  assert.deepEqual(result.data.map((row) => row.value), ['1', '1']);
});

test('day windows over 1970..9999 in a DST zone answer promptly', PROMPTLY, async () => {
  const result = await api.queryOk('far', { granularity: 'P1D', time_zone: 'Europe/Budapest', from: '1970-01-01T00:00:00Z', to: '9999-12-31T00:00:00Z' });
  assert.equal(result.data.length, 2);
});

test('hour windows with only a `to` answer promptly', PROMPTLY, async () => {
  const result = await api.queryOk('far', { granularity: 'PT1H', time_zone: 'America/Los_Angeles', to: new Date(Date.now() + 3_600_000).toISOString() });
  assert.equal(result.data.length, 1);
});
