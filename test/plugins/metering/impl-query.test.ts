/**
 * Usage queries through a real gateway over aggregates kept at ingest: every aggregation with
 * OpenMeter's value rules, windows per granularity and time zone (DST days, half-hour offsets,
 * calendar months), totals, group by, filters, sub-minute range edges, events_from, late events, CSV,
 * and request validation codes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { randomUUID } from 'node:crypto';
import { request, startGateway, type TestGateway } from '../../helpers/gateway.ts';

const PATH = '/v3/metering';

function ce(type: string, time: string, data: unknown, subject = 'acme') {
  return { specversion: '1.0', id: randomUUID(), source: 'impl-query', type, subject, time, data };
}

const iso = (t: string) => new Date(t).toISOString();

describe('metering queries', () => {
  let gw: TestGateway;
  let base: string;
  const call = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
    request(base + path, { method, headers: { 'content-type': 'application/json', ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });
  const ingest = async (events: unknown[]) => {
    const res = await call('POST', '/events', events, { 'content-type': 'application/cloudevents-batch+json' });
    assert.equal(res.status, 202, res.text);
  };
  const meter = async (body: Record<string, unknown>) => {
    const res = await call('POST', '/meters', { name: String(body.key), ...body });
    assert.equal(res.status, 201, res.text);
  };
  const query = async (key: string, body: Record<string, unknown> = {}) => {
    const res = await call('POST', `/meters/${key}/query`, body);
    assert.equal(res.status, 200, res.text);
    return res.json() as { from?: string; to?: string; data: { value: string; from: string; to: string; dimensions: Record<string, string> }[] };
  };
  const simple = (rows: { value: string; from: string; to: string }[]) => rows.map((r) => [iso(r.from), iso(r.to), r.value]);

  before(async () => {
    gw = await startGateway({
      routes: [{ name: 'metering', paths: [PATH], protocols: ['http'], strip_path: false, plugins: [{ name: 'metering', config: { allow_unauthenticated: true, retention_days: 3650 } }] }],
    });
    base = gw.http + PATH;
  });
  after(() => gw.stop());

  test('fixture A: every aggregation with the reference values', async () => {
    const T = '2024-01-01T12:00:00Z';
    for (const [key, aggregation, value_property] of [
      ['a_sum', 'sum', '$.value'], ['a_count', 'count', undefined], ['a_avg', 'avg', '$.value'], ['a_min', 'min', '$.value'],
      ['a_max', 'max', '$.value'], ['a_unique', 'unique_count', '$.name'], ['a_latest', 'latest', '$.value'],
    ] as const) {
      await meter({ key, event_type: 'fixture_a', aggregation, ...(value_property ? { value_property } : {}) });
    }
    await ingest([
      ce('fixture_a', '2024-01-01T11:59:00Z', { value: 123, name: 1 }, 'test-subject'),
      ce('fixture_a', '2024-01-01T11:59:01Z', { value: '0.4567890123456789', name: 'a' }, 'test-subject'),
      ce('fixture_a', '2024-01-01T11:59:02Z', { value: null, name: null }, 'test-subject'),
    ]);
    const range = { from: '2024-01-01T11:00:00Z', to: T };
    const expected: Record<string, string> = {
      a_sum: '123.4567890123456789', a_count: '3', a_avg: '61.72839450617283945', a_min: '0.4567890123456789',
      a_max: '123', a_unique: '2', a_latest: '0.4567890123456789',
    };
    for (const [key, value] of Object.entries(expected)) {
      const result = await query(key, range);
      assert.equal(result.from, '2024-01-01T11:00:00Z');
      assert.equal(result.to, T);
      assert.deepEqual(result.data, [{ value, from: '2024-01-01T11:00:00Z', to: T, dimensions: {} }], key);
    }
    const empty = { from: T, to: '2024-01-01T13:00:00Z' };
    for (const key of ['a_sum', 'a_avg', 'a_min', 'a_max', 'a_latest']) assert.deepEqual((await query(key, empty)).data, [], key);
    for (const key of ['a_count', 'a_unique']) assert.deepEqual((await query(key, empty)).data, [{ value: '0', from: T, to: '2024-01-01T13:00:00Z', dimensions: {} }]);
  });

  test('value rules: numeric strings, negatives, ignored non-numbers, unique text equality, latest by event time', async () => {
    await meter({ key: 'v_sum', event_type: 'values', aggregation: 'sum', value_property: '$.v' });
    await meter({ key: 'v_count', event_type: 'values', aggregation: 'count' });
    await meter({ key: 'v_unique', event_type: 'values', aggregation: 'unique_count', value_property: '$.v' });
    await meter({ key: 'v_latest', event_type: 'values', aggregation: 'latest', value_property: '$.v' });
    await ingest([
      ce('values', '2024-02-01T00:00:10Z', { v: -5 }), ce('values', '2024-02-01T00:00:20Z', { v: '2.5' }),
      ce('values', '2024-02-01T00:00:30Z', { v: true }), ce('values', '2024-02-01T00:00:40Z', { v: { a: 1 } }),
      ce('values', '2024-02-01T00:00:50Z', { v: 'NaN' }), ce('values', '2024-02-01T00:01:00Z', {}),
      ce('values', '2024-02-01T00:02:00Z', { v: 1 }), ce('values', '2024-02-01T00:03:00Z', { v: '1' }),
    ]);
    // A late event with an older time does not become the latest value.
    await ingest([ce('values', '2024-02-01T00:00:05Z', { v: 99 })]);
    assert.equal((await query('v_sum')).data[0].value, '98.5');
    assert.equal((await query('v_count')).data[0].value, '9');
    // Distinct texts: -5, 2.5, true, NaN, "" (object and missing), 1 (number and string alike), 99.
    assert.equal((await query('v_unique')).data[0].value, '7');
    assert.equal((await query('v_latest')).data[0].value, '1');
    const total = (await query('v_count')).data[0];
    assert.equal(total.from, '2024-02-01T00:00:00Z');
    assert.equal(total.to, '2024-02-01T00:04:00Z');
  });

  test('granularities: minute, hour, day and month windows; only non-empty windows; late events update past windows', async () => {
    await meter({ key: 'q_sum', event_type: 'q', aggregation: 'sum', value_property: '$.d', dimensions: { method: '$.method' } });
    const t0 = '2024-05-06T00:00:00Z';
    const at = (ms: number) => new Date(Date.parse(t0) + ms).toISOString();
    const events = [];
    for (const offset of [0, 60_000, 3_600_000, 86_400_000]) {
      for (let s = 1; s <= 5; s++) events.push(ce('q', at(offset + s * 1000), { d: '100', method: offset === 0 ? 'GET' : 'POST' }, `customer-${s}`));
    }
    await ingest(events);
    assert.deepEqual(simple((await query('q_sum', { granularity: 'PT1M' })).data), [
      [t0.replace('Z', '.000Z'), at(60_000), '500'], [at(60_000), at(120_000), '500'],
      [at(3_600_000), at(3_660_000), '500'], [at(86_400_000), at(86_460_000), '500'],
    ]);
    assert.deepEqual(simple((await query('q_sum', { granularity: 'PT1H' })).data), [
      [iso(t0), at(3_600_000), '1000'], [at(3_600_000), at(7_200_000), '500'], [at(86_400_000), at(90_000_000), '500'],
    ]);
    assert.deepEqual(simple((await query('q_sum', { granularity: 'P1D' })).data), [[iso(t0), at(86_400_000), '1500'], [at(86_400_000), at(172_800_000), '500']]);
    assert.deepEqual(simple((await query('q_sum', { granularity: 'P1M' })).data), [['2024-05-01T00:00:00.000Z', '2024-06-01T00:00:00.000Z', '2000']]);
    // Totals without bounds: earliest and latest event minute.
    assert.deepEqual(simple((await query('q_sum')).data), [[iso(t0), at(86_460_000), '2000']]);
    // A late event for a past window.
    await ingest([ce('q', '2024-05-06T00:30:00Z', { d: 7, method: 'GET' })]);
    assert.equal((await query('q_sum', { granularity: 'PT1H' })).data[0].value, '1007');
  });

  test('group by subject and dimensions; dimension filters; subject filter implies grouping; CSV', async () => {
    const result = await query('q_sum', { from: '2024-05-06T00:00:00Z', to: '2024-05-06T00:01:00Z', group_by_dimensions: ['subject', 'method'] });
    assert.equal(result.data.length, 5);
    for (const row of result.data) {
      assert.equal(row.value, '100');
      assert.equal(row.dimensions.method, 'GET');
      assert.match(row.dimensions.subject, /^customer-[1-5]$/);
    }
    const byMethod = (await query('q_sum', { group_by_dimensions: ['method'], from: '2024-05-06T00:00:00Z', to: '2024-05-08T00:00:00Z' })).data;
    assert.deepEqual(byMethod.map((r) => [r.dimensions, r.value]), [[{ method: 'GET' }, '507'], [{ method: 'POST' }, '1500']]);
    const filtered = (await query('q_sum', { filters: { dimensions: { method: { eq: 'POST' } } } })).data;
    assert.deepEqual(filtered.map((r) => [r.dimensions, r.value]), [[{}, '1500']]);
    const nested = (await query('q_sum', { filters: { dimensions: { method: { or: [{ eq: 'GET' }, { contains: 'OS' }], neq: 'GET' } } } })).data;
    assert.equal(nested[0].value, '1500');
    const subjects = (await query('q_sum', { filters: { dimensions: { subject: { in: ['customer-1', 'customer-2'] } } } })).data;
    assert.deepEqual(subjects.map((r) => [r.dimensions.subject, r.value]), [['customer-1', '400'], ['customer-2', '400']]);
    const csv = await call('POST', '/meters/q_sum/query', { group_by_dimensions: ['method'], granularity: 'P1D', from: '2024-05-06T00:00:00Z', to: '2024-05-08T00:00:00Z' }, { accept: 'text/csv' });
    assert.equal(csv.status, 200);
    assert.match(String(csv.headers['content-type']), /^text\/csv/);
    assert.match(String(csv.headers['content-disposition']), /attachment; filename="q_sum.csv"/);
    assert.equal(csv.text, 'from,to,method,value\n2024-05-06T00:00:00Z,2024-05-07T00:00:00Z,GET,507\n2024-05-06T00:00:00Z,2024-05-07T00:00:00Z,POST,1000\n2024-05-07T00:00:00Z,2024-05-08T00:00:00Z,POST,500\n');
  });

  test('sub-minute from/to edges: from inclusive, to exclusive, at second precision', async () => {
    await meter({ key: 'edge_count', event_type: 'edge', aggregation: 'count' });
    await ingest([
      ce('edge', '2024-03-01T12:00:10Z', {}), ce('edge', '2024-03-01T12:00:45Z', {}), ce('edge', '2024-03-01T12:00:59.999Z', {}),
      ce('edge', '2024-03-01T12:05:00Z', {}), ce('edge', '2024-03-01T12:07:20Z', {}), ce('edge', '2024-03-01T12:07:30Z', {}),
    ]);
    const result = await query('edge_count', { from: '2024-03-01T12:00:45.5Z', to: '2024-03-01T12:07:30Z', granularity: 'PT1H' });
    assert.deepEqual(simple(result.data), [['2024-03-01T12:00:00.000Z', '2024-03-01T13:00:00.000Z', '4']]);
    const minutes = await query('edge_count', { from: '2024-03-01T12:00:59Z', to: '2024-03-01T12:07:21Z', granularity: 'PT1M' });
    assert.deepEqual(simple(minutes.data).map((r) => [r[0], r[2]]), [['2024-03-01T12:00:00.000Z', '1'], ['2024-03-01T12:05:00.000Z', '1'], ['2024-03-01T12:07:00.000Z', '1']]);
  });

  test('events_from bounds every query', async () => {
    await ingest([ce('from_t', '2024-04-01T00:00:00Z', {}), ce('from_t', '2024-04-01T01:00:30Z', {}), ce('from_t', '2024-04-01T02:00:00Z', {})]);
    await meter({ key: 'from_count', event_type: 'from_t', aggregation: 'count', events_from: '2024-04-01T01:00:30Z' });
    assert.equal((await query('from_count')).data[0].value, '2');
    assert.equal((await query('from_count', { from: '2024-03-01T00:00:00Z', to: '2024-05-01T00:00:00Z', granularity: 'P1D' })).data[0].value, '2');
  });

  test('time zones: DST days in Los Angeles, half-hour offset hours in Kolkata, calendar months in Budapest', async () => {
    await meter({ key: 'tz_sum', event_type: 'tz', aggregation: 'sum', value_property: '$.d' });
    const la = ['2025-03-06', '2025-03-07', '2025-03-08', '2025-03-09', '2025-03-10', '2025-03-11', '2025-03-12'];
    // 10:00 local: PST (-08:00) before the 9th, PDT (-07:00) from the 9th.
    await ingest(la.map((d, i) => ce('tz', `${d}T10:00:00${i < 3 ? '-08:00' : '-07:00'}`, { d: '100' }, 'customer-dst')));
    const days = await query('tz_sum', { granularity: 'P1D', time_zone: 'America/Los_Angeles', from: '2025-03-06T00:00:00-08:00', to: '2025-03-13T00:00:00-07:00' });
    assert.equal(days.data.length, 7);
    assert.deepEqual([days.data[3].from, days.data[3].to], ['2025-03-09T00:00:00-08:00', '2025-03-10T00:00:00-07:00']);
    for (let i = 0; i < 7; i++) {
      assert.equal(days.data[i].value, '100');
      if (i > 0) assert.equal(iso(days.data[i].from), iso(days.data[i - 1].to), 'contiguous');
    }
    await ingest([ce('tz', '2025-11-02T23:30:00-08:00', { d: '5' })]);
    const fall = await query('tz_sum', { granularity: 'P1D', time_zone: 'America/Los_Angeles', from: '2025-11-02T00:00:00-07:00', to: '2025-11-03T00:00:00-08:00' });
    assert.deepEqual(fall.data, [{ value: '5', from: '2025-11-02T00:00:00-07:00', to: '2025-11-03T00:00:00-08:00', dimensions: {} }]);

    await ingest([ce('tz', '2025-06-01T10:15:00Z', { d: '1' }), ce('tz', '2025-06-01T10:45:00Z', { d: '2' })]);
    const kolkata = await query('tz_sum', { granularity: 'PT1H', time_zone: 'Asia/Kolkata', from: '2025-06-01T00:00:00Z', to: '2025-06-02T00:00:00Z' });
    assert.deepEqual(kolkata.data.map((r) => [r.from, r.to, r.value]), [
      // 10:15Z is 15:45 in Kolkata: local hours start at :30 UTC.
      ['2025-06-01T15:00:00+05:30', '2025-06-01T16:00:00+05:30', '1'],
      ['2025-06-01T16:00:00+05:30', '2025-06-01T17:00:00+05:30', '2'],
    ]);
    const kolkataDay = await query('tz_sum', { granularity: 'P1D', time_zone: 'Asia/Kolkata', from: '2025-05-31T18:30:00Z', to: '2025-06-01T18:30:00Z' });
    assert.deepEqual(kolkataDay.data.map((r) => [r.from, r.value]), [['2025-06-01T00:00:00+05:30', '3']]);

    await ingest([ce('tz', '2025-03-31T22:30:00Z', { d: '1000' })]); // 2025-04-01 00:30 in Budapest (CEST)
    const months = await query('tz_sum', { granularity: 'P1M', time_zone: 'Europe/Budapest', from: '2025-03-01T00:00:00+01:00', to: '2025-05-01T00:00:00+02:00' });
    assert.deepEqual(months.data.map((r) => [r.from, r.to, r.value]), [
      ['2025-03-01T00:00:00+01:00', '2025-04-01T00:00:00+02:00', '700'],
      ['2025-04-01T00:00:00+02:00', '2025-05-01T00:00:00+02:00', '1000'],
    ]);
  });

  test('a long range at day granularity over a year of data', async () => {
    await meter({ key: 'year_count', event_type: 'year', aggregation: 'count' });
    const start = Date.parse('2023-01-01T00:00:00Z');
    const events = Array.from({ length: 365 }, (_, d) => ce('year', new Date(start + d * 86_400_000 + (d % 1440) * 60_000 + 7_000).toISOString(), {}, `s${d % 3}`));
    await ingest(events);
    const result = await query('year_count', { granularity: 'P1D', from: '2023-01-01T00:00:00Z', to: '2024-01-01T00:00:00Z' });
    assert.equal(result.data.length, 365);
    assert.ok(result.data.every((r) => r.value === '1'));
    const perSubject = await query('year_count', { group_by_dimensions: ['subject'], time_zone: 'Asia/Kathmandu', granularity: 'P1M', from: '2023-01-01T00:00:00Z', to: '2024-01-01T00:00:00Z' });
    assert.equal(perSubject.data.reduce((sum, r) => sum + Number(r.value), 0), 365);
  });

  test('a bucket with more series than a row holds is read series by series', async () => {
    await meter({ key: 'wide_count', event_type: 'wide', aggregation: 'count' });
    await meter({ key: 'wide_max', event_type: 'wide', aggregation: 'max', value_property: '$.n' });
    const events = Array.from({ length: 700 }, (_, i) => ce('wide', `2024-06-01T10:${String(i % 60).padStart(2, '0')}:00Z`, { n: i }, `s${i}`));
    await ingest(events.slice(0, 400));
    await ingest(events.slice(400));
    const day = { from: '2024-06-01T00:00:00Z', to: '2024-06-02T00:00:00Z', granularity: 'P1D' };
    assert.equal((await query('wide_count', day)).data[0].value, '700');
    assert.equal((await query('wide_max', day)).data[0].value, '699');
    const perSubject = await query('wide_count', { ...day, group_by_dimensions: ['subject'] });
    assert.equal(perSubject.data.length, 700);
    assert.ok(perSubject.data.every((r) => r.value === '1'));

    // Series of the bucket keep counting after it overflowed, at every level (Kolkata's days use the half-hour ones).
    await ingest([ce('wide', '2024-06-01T10:00:30Z', { n: 1000 }, 's0'), ce('wide', '2024-06-01T10:59:00Z', { n: 5 }, 's699')]);
    const later = new Map((await query('wide_count', { ...day, group_by_dimensions: ['subject'] })).data.map((r) => [r.dimensions.subject, r.value]));
    assert.deepEqual([later.get('s0'), later.get('s1'), later.get('s699'), later.size], ['2', '1', '2', 700]);
    assert.equal((await query('wide_max', day)).data[0].value, '1000');
    const kolkata = await query('wide_count', { from: '2024-06-01T00:00:00+05:30', to: '2024-06-02T00:00:00+05:30', granularity: 'P1D', time_zone: 'Asia/Kolkata', group_by_dimensions: ['subject'] });
    assert.equal(kolkata.data.reduce((sum, r) => sum + Number(r.value), 0), 702);
    assert.equal(kolkata.data.find((r) => r.dimensions.subject === 's0')?.value, '2');
  });

  test('request validation: codes of the reference, every problem listed', async () => {
    const problem = async (body: Record<string, unknown>, rule: string) => {
      const res = await call('POST', '/meters/q_sum/query', body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.match(String(res.headers['content-type']), /^application\/problem\+json/);
      const rules = res.json().invalid_parameters.map((p: any) => p.rule);
      assert.ok(rules.includes(rule), `${rule} in ${res.text}`);
      return res.json();
    };
    assert.match((await problem({ from: '2024-01-01T00:00:00Z', to: '2024-01-01T00:00:00Z' }, 'invalid')).detail, /from and to cannot be equal/);
    assert.match((await problem({ from: '2024-01-02T00:00:00Z', to: '2024-01-01T00:00:00Z' }, 'invalid')).detail, /from must be before to/);
    await problem({ granularity: 'P1Y' }, 'invalid_window_size');
    await problem({ time_zone: 'Invalid/Zone' }, 'invalid_time_zone');
    await problem({ group_by_dimensions: ['nonexistent'] }, 'invalid_group_by');
    await problem({ filters: { dimensions: { nope: { eq: 'x' } } } }, 'invalid_dimension_filter');
    await problem({ filters: { dimensions: { subject: { neq: 'x' } } } }, 'unsupported_filter_operator');
    const many = await problem({ granularity: 'P1Y', time_zone: 'Nowhere', from: 'yesterday' }, 'is_date_time');
    assert.equal(many.invalid_parameters.length, 3);
    assert.equal((await call('POST', '/meters/unknown_meter/query', {})).status, 404);
    assert.equal((await call('POST', '/meters/q_sum/query', '{')).status, 400);
  });
});
