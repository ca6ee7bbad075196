/**
 * Retention: events older than `retention_days` are
 * purged, and an event whose time is already outside retention is rejected. An event that ages out must
 * stop counting and stop being listed as soon as it is outside retention, whatever the purge's schedule
 * and whatever roll-up bucket (minute, hour, day) still holds it.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { assertProblem, DAY, event, HOUR, iso, MeteringApi, meteringConfig, sleep, totalOf } from './catalogue-support.ts';

const METERS = [
  { key: 'kept', name: 'Kept', event_type: 'kept', aggregation: 'count' },
  { key: 'kept_sum', name: 'Kept sum', event_type: 'kept', aggregation: 'sum', value_property: '$.v' },
];

let gateway: TestGateway;
let api: MeteringApi;

before(async () => {
  gateway = await startGateway(meteringConfig({ metering: { retention_days: 1 }, meters: METERS }));
  api = await MeteringApi.connect(gateway.https);
});
after(() => gateway?.stop());

test('an event that ages out of the retention stops counting and being listed', async () => {
  const expiresAt = Date.now() + 6_000; // room for a slow ingest under load
  const expiring = event({ type: 'kept', time: iso(expiresAt - DAY), data: { v: 1 } });
  const recent = event({ type: 'kept', time: iso(Date.now() - HOUR), data: { v: 10 } });
  await api.ingestOk(expiring);
  await api.ingestOk(recent);
  assert.equal(await api.totalWhen('kept', 2), 2, 'both count while inside retention');

  await sleep(expiresAt + 1_500 - Date.now());
  assert.equal(totalOf(await api.queryOk('kept')), 1);
  assert.equal(totalOf(await api.queryOk('kept_sum')), 10);
  const daily = await api.queryOk('kept_sum', { granularity: 'P1D' });
  assert.equal(daily.data.reduce((sum, row) => sum + Number(row.value), 0), 10, 'no day bucket still holds it');
  assert.deepEqual((await api.listAllEvents({ type: 'kept' })).map((item) => item.event.id), [recent.id]);
  assertProblem(await api.ingest(expiring), 400, 'time');
});
