/**
 * OpenMeter catalogue §7.5 (aggregation results), ported to Tollgate's v3 query API: values are decimal
 * strings, compared here as numbers (OpenMeter's float and decimal modes both give these figures).
 * Fixture A is placed on a recent day: events older than the 2-year retention are rejected by Tollgate.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { event, HOUR, iso, MeteringApi, meteringConfig, MINUTE, rows, totalOf, unique, utcDayAgo } from './catalogue-support.ts';

/** Fixture A: T at noon two days ago; e1..e3 one second apart a minute before T. */
const T = utcDayAgo(2).getTime() + 12 * HOUR;
const FIXTURE_A = [
  { time: T - 60_000, data: { value: 123, name: 1 } },
  { time: T - 59_000, data: { value: '0.4567890123456789', name: 'a' } },
  { time: T - 58_000, data: { value: null, name: null } },
];
const A_TYPE = 'test-event';
const aMeter = (aggregation: string, valueProperty: string | null = '$.value') => ({
  key: `a_${aggregation}`,
  name: `Fixture A ${aggregation}`,
  event_type: A_TYPE,
  aggregation,
  ...(valueProperty ? { value_property: valueProperty } : {}),
});
const A_METERS = [
  aMeter('sum'),
  aMeter('count', null),
  aMeter('avg'),
  aMeter('min'),
  aMeter('max'),
  aMeter('unique_count', '$.name'),
  aMeter('latest'),
];

let gateway: TestGateway;
let api: MeteringApi;

before(async () => {
  gateway = await startGateway(meteringConfig({ meters: A_METERS }));
  api = await MeteringApi.connect(gateway.https);
  await api.ingestOk(FIXTURE_A.map(({ time, data }) => event({ type: A_TYPE, subject: 'test-subject', time: iso(time), data })));
  await api.totalWhen('a_count', 3, { from: iso(T - HOUR), to: iso(T) });
});
after(() => gateway?.stop());

async function meterOf(aggregation: string, valueProperty?: string, extra: Record<string, unknown> = {}): Promise<string> {
  const key = unique(aggregation);
  await api.createMeterOk({ key, name: key, event_type: key, aggregation, ...(valueProperty ? { value_property: valueProperty } : {}), ...extra });
  return key;
}

describe('§7.5 aggregations over fixture A, [T-1h, T)', () => {
  const window = { from: iso(T - HOUR), to: iso(T) };
  const cases: [id: string, aggregation: string, value: number][] = [
    ['AGG-01', 'sum', 123.45678901234568],
    ['AGG-02', 'count', 3],
    ['AGG-03', 'avg', 61.72839450617284],
    ['AGG-04', 'min', 0.4567890123456789],
    ['AGG-05', 'max', 123],
    ['AGG-06', 'unique_count', 2],
    ['AGG-07', 'latest', 0.4567890123456789],
  ];
  for (const [id, aggregation, value] of cases) {
    test(`${id} ${aggregation} = ${value}, one row bounded by the query's from and to`, async () => {
      const result = await api.queryOk(`a_${aggregation}`, window);
      assert.deepEqual(rows(result), [{ from: window.from, to: window.to, value }]);
    });
  }

  describe('AGG-08 an empty range [T, T+1h)', () => {
    const empty = { from: iso(T), to: iso(T + HOUR) };
    for (const aggregation of ['sum', 'avg', 'min', 'max', 'latest']) {
      test(`${aggregation} returns no row`, async () => {
        assert.deepEqual((await api.queryOk(`a_${aggregation}`, empty)).data, []);
      });
    }
    for (const aggregation of ['count', 'unique_count']) {
      test(`${aggregation} returns one zero row bounded by from and to`, async () => {
        assert.deepEqual(rows(await api.queryOk(`a_${aggregation}`, empty)), [{ from: empty.from, to: empty.to, value: 0 }]);
      });
    }
  });
});

describe('§7.5 aggregation semantics', () => {
  test('AGG-09 unique_count of 20 events with 10 distinct values is 10', async () => {
    const key = await meterOf('unique_count', '$.value');
    await api.ingestOk(Array.from({ length: 20 }, (_, i) => event({ type: key, data: { value: String(Math.floor(i / 2)) } })));
    assert.equal(await api.totalWhen(key, 10), 10);
  });

  test('AGG-10 latest is the value with the greatest event time, not the last received', async () => {
    const key = await meterOf('latest', '$.value');
    const now = Date.now();
    await api.ingestOk(event({ type: key, time: iso(now - MINUTE), data: { value: 150 } }));
    await api.ingestOk(event({ type: key, time: iso(now - 5 * MINUTE), data: { value: 100 } }));
    await api.ingestOk(event({ type: key, time: iso(now - 3 * MINUTE), data: { value: 200 } }));
    const result = await api.queryWhen(key, {}, (r) => totalOf(r) === 150);
    assert.equal(totalOf(result), 150);
  });

  test('AGG-11 count with a model dimension, filtered to one subject: two models count 2', async () => {
    const key = await meterOf('count', undefined, { dimensions: { model: '$.model' } });
    const time = iso(Date.now() - MINUTE);
    await api.ingestOk([
      event({ type: key, subject: 'S', time, data: { model: 'gpt-4' } }),
      event({ type: key, subject: 'S', time, data: { model: 'gpt-3' } }),
      event({ type: key, subject: 'other', time, data: { model: 'gpt-4' } }),
    ]);
    const body = { filters: { dimensions: { subject: { eq: 'S' } } } };
    const result = await api.queryWhen(key, body, (r) => r.data.length > 0 && Number(r.data[0].value) >= 2);
    assert.equal(result.data.length, 1);
    assert.equal(result.data[0].value, '2');
    assert.equal(result.data[0].dimensions.subject, 'S');
  });

  test('AGG-12 (adapted: no customers) a total without grouping spans subjects', async () => {
    const key = await meterOf('count');
    await api.ingestOk([event({ type: key, subject: 'multi_subject_1' }), event({ type: key, subject: 'multi_subject_2' })]);
    const result = await api.queryWhen(key, {}, (r) => totalOf(r) >= 2);
    assert.equal(result.data.length, 1);
    assert.equal(result.data[0].value, '2');
  });

  test('AGG-13 values true, an object and a missing one: sum has no row, count on the type has 3', async () => {
    const key = await meterOf('sum', '$.value');
    const counter = unique('count');
    await api.createMeterOk({ key: counter, name: counter, event_type: key, aggregation: 'count' });
    await api.ingestOk([event({ type: key, data: { value: true } }), event({ type: key, data: { value: { a: 1 } } }), event({ type: key, data: {} })]);
    assert.equal(await api.totalWhen(counter, 3), 3);
    assert.deepEqual((await api.queryOk(key)).data, []);
  });

  test('AGG-14 negative numbers and numeric strings add up: -5 + "2.5" = -2.5', async () => {
    const key = await meterOf('sum', '$.value');
    await api.ingestOk([event({ type: key, data: { value: -5 } }), event({ type: key, data: { value: '2.5' } })]);
    const result = await api.queryWhen(key, {}, (r) => r.data.length > 0 && Number(r.data[0].value) === -2.5);
    assert.equal(result.data[0].value, '-2.5');
  });

  test('AGG-15 unique_count treats 1 and "1" as the same value', async () => {
    const key = await meterOf('unique_count', '$.value');
    await api.ingestOk([event({ type: key, data: { value: 1 } }), event({ type: key, data: { value: '1' } })]);
    const result = await api.queryWhen(key, {}, (r) => totalOf(r) === 1);
    assert.equal(totalOf(result), 1);
  });

  test('unique_count is per window, not additive: one value in two hours is 1 per hour and 1 in total', async () => {
    const key = await meterOf('unique_count', '$.value');
    const hour = utcDayAgo(1).getTime() + 10 * HOUR;
    await api.ingestOk([
      event({ type: key, time: iso(hour + MINUTE), data: { value: 'x' } }),
      event({ type: key, time: iso(hour + HOUR + MINUTE), data: { value: 'x' } }),
    ]);
    const hourly = await api.queryWhen(key, { granularity: 'PT1H' }, (r) => r.data.length >= 2);
    assert.deepEqual(rows(hourly), [
      { from: iso(hour), to: iso(hour + HOUR), value: 1 },
      { from: iso(hour + HOUR), to: iso(hour + 2 * HOUR), value: 1 },
    ]);
    assert.equal(totalOf(await api.queryOk(key)), 1);
  });

  test('avg, min and max ignore unusable values and accept negatives', async () => {
    const type = unique('stats');
    for (const aggregation of ['avg', 'min', 'max']) {
      await api.createMeterOk({ key: `${type}_${aggregation}`, name: aggregation, event_type: type, aggregation, value_property: '$.value' });
    }
    await api.ingestOk([-4, '10', 'x', null, 3].map((value) => event({ type, data: { value } })));
    assert.equal(await api.totalWhen(`${type}_max`, 10), 10);
    assert.equal(totalOf(await api.queryOk(`${type}_min`)), -4);
    assert.equal(totalOf(await api.queryOk(`${type}_avg`)), 3);
  });

  test('a meter created after its events covers them (history is aggregated)', async () => {
    const type = unique('history');
    await api.ingestOk([1, 2, 3].map((value) => event({ type, time: iso(utcDayAgo(30).getTime() + value * HOUR), data: { value } })));
    await api.createMeterOk({ key: type, name: type, event_type: type, aggregation: 'sum', value_property: '$.value' });
    assert.equal(await api.totalWhen(type, 6), 6);
  });
});
