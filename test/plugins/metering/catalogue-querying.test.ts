/**
 * OpenMeter catalogue §7.6 (querying), ported to Tollgate's v3 query (`POST /meters/{id or key}/query` with
 * `from`, `to`, `granularity`, `time_zone`, `group_by_dimensions`, `filters.dimensions`). v1-only cases
 * (`filterGroupBy` vs `advancedMeterGroupByFilters`, QRY-19) have no v3 counterpart. Fixture Q sits on the 6th
 * of the month two months ago, and the DST cases on last year's transitions, inside the 2-year retention.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { assertProblem, DAY, event, HOUR, iso, MeteringApi, meteringConfig, MINUTE, rows, totalOf, unique } from './catalogue-support.ts';

const now = new Date();
/** Fixture Q's t0: midnight UTC on the 6th, two months back (so t0+1d stays in the same month). */
const t0 = Date.UTC(now.getUTCFullYear(), now.getUTCMonth() - 2, 6);
const Q_TIMES = [
  { at: t0, method: 'GET', path: '/a' },
  { at: t0 + MINUTE, method: 'POST', path: '/b' },
  { at: t0 + HOUR, method: 'GET', path: '/c' },
  { at: t0 + DAY, method: 'PUT', path: '/d' },
];
const SUBJECTS = ['customer-1', 'customer-2', 'customer-3', 'customer-4', 'customer-5'];
const M_QUERY = { key: 'query', name: 'Query', event_type: 'query', aggregation: 'sum', value_property: '$.duration_ms', dimensions: { method: '$.method', path: '$.path' } };

let gateway: TestGateway;
let api: MeteringApi;

before(async () => {
  gateway = await startGateway(meteringConfig({ meters: [M_QUERY] }));
  api = await MeteringApi.connect(gateway.https);
  const fixtureQ = Q_TIMES.flatMap(({ at, method, path }) =>
    SUBJECTS.map((subject) => event({ type: 'query', subject, time: iso(at), data: { duration_ms: '100', method, path } })),
  );
  await api.ingestOk(fixtureQ);
  await api.totalWhen('query', 2000);
});
after(() => gateway?.stop());

const span = (from: number, to: number, value: number) => ({ from: iso(from), to: iso(to), value });

describe('§7.6 querying fixture Q', () => {
  test('QRY-01/08 the total without parameters: one row 2000 from t0 to the minute after the last event', async () => {
    const result = await api.queryOk('query', {});
    assert.deepEqual(rows(result), [span(t0, t0 + DAY + MINUTE, 2000)]);
    assert.equal(result.data[0].value, '2000');
    assert.equal(result.from, undefined, 'no from echoed when none was sent');
    assert.equal(result.to, undefined, 'no to echoed when none was sent');
  });

  test('QRY-02/09 PT1M: four minute windows of 500', async () => {
    assert.deepEqual(rows(await api.queryOk('query', { granularity: 'PT1M' })), [
      span(t0, t0 + MINUTE, 500),
      span(t0 + MINUTE, t0 + 2 * MINUTE, 500),
      span(t0 + HOUR, t0 + HOUR + MINUTE, 500),
      span(t0 + DAY, t0 + DAY + MINUTE, 500),
    ]);
  });

  test('QRY-03/09 PT1H: 1000, 500, 500', async () => {
    assert.deepEqual(rows(await api.queryOk('query', { granularity: 'PT1H' })), [
      span(t0, t0 + HOUR, 1000),
      span(t0 + HOUR, t0 + 2 * HOUR, 500),
      span(t0 + DAY, t0 + DAY + HOUR, 500),
    ]);
  });

  test('QRY-04/09 P1D: 1500, 500', async () => {
    assert.deepEqual(rows(await api.queryOk('query', { granularity: 'P1D' })), [span(t0, t0 + DAY, 1500), span(t0 + DAY, t0 + 2 * DAY, 500)]);
  });

  test('QRY-05/10 filtering subject in [customer-1, customer-2] groups by subject: two rows of 400', async () => {
    const result = await api.queryOk('query', { filters: { dimensions: { subject: { in: ['customer-1', 'customer-2'] } } } });
    const sorted = rows(result, ['subject']).sort((a, b) => String(a.subject).localeCompare(String(b.subject)));
    assert.deepEqual(sorted, [
      { ...span(t0, t0 + DAY + MINUTE, 400), subject: 'customer-1' },
      { ...span(t0, t0 + DAY + MINUTE, 400), subject: 'customer-2' },
    ]);
  });

  test('grouping by subject gives one row per subject', async () => {
    const result = await api.queryOk('query', { group_by_dimensions: ['subject'] });
    assert.deepEqual(result.data.map((r) => r.dimensions.subject).sort(), SUBJECTS);
    assert.ok(result.data.every((r) => r.value === '400'));
  });

  test('QRY-06 the query with and without Accept: application/json is the same', async () => {
    const plain = await api.queryOk('query', {});
    const res = await api.query('query', {}, { accept: 'application/json' });
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-type']), /^application\/json/);
    assert.deepEqual(res.json(), plain);
  });

  test('QRY-07 Accept: text/csv gives from,to,value rows', async () => {
    const res = await api.query('query', {}, { accept: 'text/csv' });
    assert.equal(res.status, 200, res.text);
    assert.match(String(res.headers['content-type']), /^text\/csv/);
    const [header, line, ...rest] = res.text.trim().split(/\r?\n/);
    assert.equal(header, 'from,to,value');
    assert.deepEqual(rest, []);
    const [from, to, value] = line.split(',');
    assert.deepEqual([iso(from), iso(to), Number(value)], [iso(t0), iso(t0 + DAY + MINUTE), 2000]);
  });

  test('Accept lists: CSV only where text/csv is preferred over JSON', async () => {
    const contentType = async (accept: string) => String((await api.query('query', {}, { accept })).headers['content-type']);
    assert.match(await contentType('application/json, text/csv;q=0.5'), /^application\/json/);
    assert.match(await contentType('application/json, text/csv'), /^application\/json/);
    assert.match(await contentType('text/csv;q=0.9, application/json;q=0.1'), /^text\/csv/);
    assert.match(await contentType('text/csv; charset=utf-8'), /^text\/csv/);
    assert.match(await contentType('text/csv;q=0, */*'), /^application\/json/);
  });

  test('CSV grouped by subject has a subject column', async () => {
    const res = await api.query('query', { group_by_dimensions: ['subject'] }, { accept: 'text/csv' });
    assert.equal(res.status, 200, res.text);
    const [header, ...lines] = res.text.trim().split(/\r?\n/);
    assert.equal(header, 'from,to,subject,value');
    assert.deepEqual(lines.map((l) => l.split(',')[2]).sort(), SUBJECTS);
  });

  test('CSV puts the subject column first, then the dimensions in request order (OpenMeter v3 query_csv.go)', async () => {
    const res = await api.query('query', { group_by_dimensions: ['path', 'subject', 'method'], filters: { dimensions: { path: { eq: '/c' } } } }, { accept: 'text/csv' });
    assert.equal(res.status, 200, res.text);
    const [header, ...lines] = res.text.trim().split(/\r?\n/);
    assert.equal(header, 'from,to,subject,path,method,value');
    assert.deepEqual(lines.map((l) => l.split(',').slice(2)).sort(), SUBJECTS.map((s) => [s, '/c', 'GET', '100']));
  });

  test('QRY-16 grouping by a dimension: GET and POST rows', async () => {
    const result = await api.queryOk('query', { group_by_dimensions: ['method'] });
    const byMethod = Object.fromEntries(result.data.map((r) => [r.dimensions.method, Number(r.value)]));
    assert.deepEqual(byMethod, { GET: 1000, POST: 500, PUT: 500 });
    assert.ok(result.data.every((r) => r.dimensions.subject === undefined), 'not grouped by subject');
  });

  test('QRY-17 filtering a dimension with eq, without grouping by it', async () => {
    const result = await api.queryOk('query', { filters: { dimensions: { method: { eq: 'GET' } } } });
    assert.deepEqual(result.data.map((r) => Number(r.value)), [1000]);
  });

  test('QRY-20 neq, in, nin and contains filters', async () => {
    const total = async (filter: Record<string, unknown>) => totalOf(await api.queryOk('query', { filters: { dimensions: filter } }));
    assert.equal(await total({ method: { neq: 'GET' } }), 1000);
    assert.equal(await total({ path: { in: ['/a', '/d'] } }), 1000);
    assert.equal(await total({ path: { nin: ['/a', '/d'] } }), 1000);
    assert.equal(await total({ method: { contains: 'PU' } }), 500);
    assert.equal(await total({ method: { eq: 'GET' }, path: { eq: '/c' } }), 500);
  });

  test('contains and ncontains ignore case (OpenMeter: LOWER(value) LIKE LOWER(%pattern%))', async () => {
    const total = async (filter: Record<string, unknown>) => totalOf(await api.queryOk('query', { filters: { dimensions: filter } }));
    assert.equal(await total({ method: { contains: 'pu' } }), 500);
    assert.equal(await total({ method: { ncontains: 'get' } }), 1000);
  });

  test('and/or nest two levels deep (OpenMeter maxGroupByFilterComplexityDepth = 2); a third level is rejected', async () => {
    const notGetOrPut = { and: [{ neq: 'GET' }, { neq: 'PUT' }] };
    const result = await api.queryOk('query', { filters: { dimensions: { method: { or: [notGetOrPut, { eq: 'GET' }] } } } });
    assert.equal(totalOf(result), 1500);
    const tooDeep = { and: [{ or: [{ and: [{ eq: 'GET' }] }] }] };
    assertProblem(await api.query('query', { filters: { dimensions: { method: tooDeep } } }), 400, 'method');
  });

  test('a subject filter that names no subject neither filters nor groups (OpenMeter: only a non-empty list does)', async () => {
    const result = await api.queryOk('query', { filters: { dimensions: { subject: { in: [] } } } });
    assert.deepEqual(result.data.map((r) => [r.dimensions, r.value]), [[{}, '2000']]);
  });

  test('QRY-24 a total with from and to is bounded by them, and they are echoed', async () => {
    const body = { from: iso(t0), to: iso(t0 + 2 * DAY) };
    const result = await api.queryOk('query', body);
    assert.deepEqual(rows(result), [span(t0, t0 + 2 * DAY, 2000)]);
    assert.equal(iso(result.from!), body.from);
    assert.equal(iso(result.to!), body.to);
  });

  test('QRY-25 from is inclusive and to exclusive: [t0+1h, t0+1d) is 500', async () => {
    assert.equal(totalOf(await api.queryOk('query', { from: iso(t0 + HOUR), to: iso(t0 + DAY) })), 500);
  });

  test('QRY-27 a meter with events_from t0+1h ignores the older events', async () => {
    const key = unique('query_from');
    await api.createMeterOk({ ...M_QUERY, key, events_from: iso(t0 + HOUR) });
    assert.equal(await api.totalWhen(key, 1000), 1000);
  });

  test('QRY-30 P1M: one calendar-month window of 2000', async () => {
    const month = new Date(t0);
    const start = Date.UTC(month.getUTCFullYear(), month.getUTCMonth(), 1);
    const end = Date.UTC(month.getUTCFullYear(), month.getUTCMonth() + 1, 1);
    assert.deepEqual(rows(await api.queryOk('query', { granularity: 'P1M' })), [span(start, end, 2000)]);
  });

  test('windows follow time_zone: P1D in Asia/Tokyo starts at 15:00Z', async () => {
    const result = await api.queryOk('query', { granularity: 'P1D', time_zone: 'Asia/Tokyo' });
    assert.deepEqual(rows(result), [span(t0 - 9 * HOUR, t0 + 15 * HOUR, 1500), span(t0 + 15 * HOUR, t0 + DAY + 15 * HOUR, 500)]);
  });
});

describe('§7.6 query validation', () => {
  test('QRY-13 from equal to to is rejected', async () => {
    assertProblem(await api.query('query', { from: iso(t0), to: iso(t0) }), 400);
  });

  test('QRY-14 from after to is rejected', async () => {
    assertProblem(await api.query('query', { from: iso(t0 + DAY), to: iso(t0) }), 400);
  });

  test('QRY-15/23 grouping by an unknown dimension is rejected', async () => {
    const problem = assertProblem(await api.query('query', { group_by_dimensions: ['unknown'] }), 400, 'group_by_dimensions');
    assert.equal(problem.detail, 'validation error: invalid group by: unknown');
  });

  test('QRY-18 filtering an unknown dimension is rejected', async () => {
    assertProblem(await api.query('query', { filters: { dimensions: { nope: { eq: 'x' } } } }), 400, 'nope');
  });

  test('subject filters take only eq and in', async () => {
    assertProblem(await api.query('query', { filters: { dimensions: { subject: { neq: 'customer-1' } } } }), 400, 'subject');
  });

  test('QRY-21 an unknown time zone is rejected', async () => {
    assertProblem(await api.query('query', { time_zone: 'Invalid/Zone' }), 400, 'time_zone');
  });

  test('QRY-22 granularity P1Y is rejected', async () => {
    assertProblem(await api.query('query', { granularity: 'P1Y' }), 400, 'granularity');
  });

  test('a from that is not RFC 3339 is rejected', async () => {
    assertProblem(await api.query('query', { from: 'yesterday' }), 400, 'from');
  });

  test('QRY-29 an unknown meter is a 404 problem', async () => {
    assertProblem(await api.query('no_such_meter', {}), 404);
  });
});

describe('§7.6 windows', () => {
  test('QRY-26 buckets keep their clock-aligned start (not clamped to from)', async () => {
    const key = unique('align');
    await api.createMeterOk({ key, name: key, event_type: key, aggregation: 'sum', value_property: '$.v' });
    const hour = t0 + 5 * HOUR;
    await api.ingestOk(event({ type: key, time: iso(hour + 45 * MINUTE), data: { v: 100 } }));
    await api.totalWhen(key, 100);
    const result = await api.queryOk(key, { from: iso(hour + 30 * MINUTE), to: iso(hour + 2 * HOUR), granularity: 'PT1H' });
    assert.deepEqual(rows(result), [span(hour, hour + HOUR, 100)]);
  });

  test('QRY-28 an event lacking a dimension is grouped under the empty string', async () => {
    const key = unique('missing_dim');
    await api.createMeterOk({ key, name: key, event_type: key, aggregation: 'sum', value_property: '$.v', dimensions: { method: '$.method' } });
    await api.ingestOk([event({ type: key, data: { v: 1 } }), event({ type: key, data: { v: 2, method: 'GET' } })]);
    const result = await api.queryWhen(key, { group_by_dimensions: ['method'] }, (r) => r.data.length >= 2);
    const byMethod = Object.fromEntries(result.data.map((r) => [r.dimensions.method, Number(r.value)]));
    assert.deepEqual(byMethod, { '': 1, GET: 2 });
  });

  /** Second Sunday of March / first Sunday of November of `year`: US DST transitions. */
  function sunday(year: number, month: number, nth: number): number {
    const firstDay = new Date(Date.UTC(year, month, 1)).getUTCDay();
    return Date.UTC(year, month, 1 + ((7 - firstDay) % 7) + (nth - 1) * 7);
  }
  const year = now.getUTCFullYear() - 1;
  /** Midnight in Los Angeles of the UTC date `day`, given the offset in hours that applies then. */
  const laMidnight = (day: number, offsetHours: number) => day + offsetHours * HOUR;

  async function dailyAcrossTransition(transition: number, offsetBefore: number, offsetAfter: number) {
    const key = unique('dst');
    await api.createMeterOk({ key, name: key, event_type: key, aggregation: 'sum', value_property: '$.duration_ms' });
    // The offset of a day's midnight: the transition happens at 02:00 local, after that day's midnight.
    const offsetOf = (day: number) => (day <= transition ? offsetBefore : offsetAfter);
    const days = Array.from({ length: 8 }, (_, i) => transition + (i - 3) * DAY);
    // One event per local day, mid-morning (10 h after local midnight stays inside even the 23-h day).
    const events = days.slice(0, 7).map((day) => event({ type: key, subject: 'customer-dst', time: iso(laMidnight(day, offsetOf(day)) + 10 * HOUR), data: { duration_ms: '100' } }));
    await api.ingestOk(events);
    await api.totalWhen(key, 700);
    const result = await api.queryOk(key, {
      granularity: 'P1D',
      time_zone: 'America/Los_Angeles',
      from: iso(laMidnight(days[0], offsetOf(days[0]))),
      to: iso(laMidnight(days[7], offsetOf(days[7]))),
      filters: { dimensions: { subject: { eq: 'customer-dst' } } },
    });
    const expected = days.slice(0, 7).map((day, i) => span(laMidnight(day, offsetOf(day)), laMidnight(days[i + 1], offsetOf(days[i + 1])), 100));
    assert.deepEqual(rows(result), expected);
    return rows(result);
  }

  test('QRY-11 P1D in America/Los_Angeles across the spring transition: contiguous local days, one of 23 h', async () => {
    const transition = sunday(year, 2, 2);
    const result = await dailyAcrossTransition(transition, 8, 7);
    assert.equal(Date.parse(String(result[3].to)) - Date.parse(String(result[3].from)), 23 * HOUR);
  });

  test('QRY-12 P1D in America/Los_Angeles across the autumn transition: one day of 25 h', async () => {
    const transition = sunday(year, 10, 1);
    const result = await dailyAcrossTransition(transition, 7, 8);
    assert.equal(Date.parse(String(result[3].to)) - Date.parse(String(result[3].from)), 25 * HOUR);
  });
});
