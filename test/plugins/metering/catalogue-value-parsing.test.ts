/**
 * OpenMeter catalogue §7.4 (per-event value parsing and the validation messages of the event list), ported
 * to Tollgate's v3 API: accepted-but-unusable events are stored, ignored by value aggregations, and listed
 * with `validation_errors: [{code, message}]`, one per matching meter that cannot use them.
 * Each meter has its own event type so that an event meets exactly one meter.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { assertProblem, event, MeteringApi, meteringConfig, unique, type EventItem } from './catalogue-support.ts';

const SUM = { key: 'p_sum', name: 'Duration', event_type: 'p_sum', aggregation: 'sum', value_property: '$.duration_ms', dimensions: { method: '$.method', path: '$.path' } };
const COUNT = { key: 'p_count', name: 'Calls', event_type: 'p_count', aggregation: 'count' };
const UNIQUE = { key: 'p_unique', name: 'Traces', event_type: 'p_unique', aggregation: 'unique_count', value_property: '$.trace_id' };

let gateway: TestGateway;
let api: MeteringApi;

before(async () => {
  gateway = await startGateway(meteringConfig({ meters: [SUM, COUNT, UNIQUE] }));
  api = await MeteringApi.connect(gateway.https);
});
after(() => gateway?.stop());

/** Ingests one event of `meter` (with `data`, or without any when undefined) under a fresh subject. */
async function ingestFor(meter: { event_type: string }, data: unknown): Promise<{ subject: string; item: EventItem }> {
  const subject = unique('subject');
  const e = event({ type: meter.event_type, subject, data });
  if (data === undefined) delete e.data;
  await api.ingestOk(e);
  const [item] = await api.eventsWhen({ id: e.id }, 1);
  assert.ok(item, 'the event is listed');
  return { subject, item };
}

/**
 * The query row of one subject (grouped by subject and the meter's dimensions), if any; waits for it
 * when `expected` (aggregation may trail the 202).
 */
async function rowOf(meterKey: string, subject: string, dimensions: string[] = [], expected = false) {
  const body = { group_by_dimensions: ['subject', ...dimensions], filters: { dimensions: { subject: { eq: subject } } } };
  const result = expected ? await api.queryWhen(meterKey, body, (r) => r.data.length > 0) : await api.queryOk(meterKey, body);
  assert.ok(result.data.length <= 1, JSON.stringify(result.data));
  return result.data[0];
}

function messagesOf(item: EventItem): string[] {
  return (item.validation_errors ?? []).map((error) => {
    assert.equal(typeof error.code, 'string');
    return error.message;
  });
}

/** A usable event: no validation error, and the meter's row for its subject. */
async function parsed(meter: typeof SUM | typeof COUNT | typeof UNIQUE, data: unknown, dimensions: string[] = []) {
  const { subject, item } = await ingestFor(meter, data);
  assert.deepEqual(messagesOf(item), []);
  const row = await rowOf(meter.key, subject, dimensions, true);
  assert.ok(row, 'the event is aggregated');
  return row;
}

/** An unusable event: listed with exactly this message, and no row in the value aggregation. */
async function flagged(data: unknown, message: string): Promise<void> {
  const { subject, item } = await ingestFor(SUM, data);
  assert.deepEqual(messagesOf(item), [message]);
  assert.equal(await rowOf(SUM.key, subject), undefined, 'ignored by sum');
}

describe('§7.4 value parsing', () => {
  test('P-01 a number value with both dimensions', async () => {
    const row = await parsed(SUM, { duration_ms: 100, method: 'GET', path: '/api/v1' }, ['method', 'path']);
    assert.equal(Number(row.value), 100);
    assert.equal(row.dimensions.method, 'GET');
    assert.equal(row.dimensions.path, '/api/v1');
  });

  test('P-02 a numeric string value', async () => {
    const row = await parsed(SUM, { duration_ms: '100', method: 'GET', path: '/api/v1' });
    assert.equal(Number(row.value), 100);
  });

  test('P-03 count needs no value: {} counts 1', async () => {
    const row = await parsed(COUNT, {});
    assert.equal(row.value, '1');
  });

  test('P-04 unique_count takes a string value', async () => {
    const row = await parsed(UNIQUE, { trace_id: 'test_trace_id' });
    assert.equal(row.value, '1');
  });

  test('P-05 missing dimensions are empty strings', async () => {
    const row = await parsed(SUM, { duration_ms: 100 }, ['method', 'path']);
    assert.equal(Number(row.value), 100);
    assert.equal(row.dimensions.method, '');
    assert.equal(row.dimensions.path, '');
  });

  test('P-06 (adapted) data that cannot be parsed as an object is rejected at ingest', async () => {
    assertProblem(await api.ingest(event({ type: SUM.event_type, data: '{' })), 400, 'data');
    const raw = `{"specversion":"1.0","id":"p06","source":"p","type":"p_sum","subject":"s","data":{`;
    assertProblem(await api.send('POST', '/events', raw, { 'content-type': 'application/cloudevents+json' }), 400);
  });

  test('P-07 null data', async () => {
    await flagged(null, 'invalid event: null and missing value property');
  });

  test('P-07b absent data', async () => {
    await flagged(undefined, 'invalid event: null and missing value property');
  });

  test('P-08 missing value property', async () => {
    await flagged({ method: 'GET', path: '/api/v1' }, 'invalid event: missing value property: "$.duration_ms"');
  });

  test('P-09 null value', async () => {
    await flagged({ duration_ms: null, method: 'GET', path: '/api/v1' }, 'invalid event: value cannot be null');
  });

  test('P-10 "NaN"', async () => {
    await flagged({ duration_ms: 'NaN', method: 'GET', path: '/api/v1' }, 'invalid event: value cannot be NaN');
  });

  for (const infinity of ['Inf', '+Inf', '-Inf']) {
    test(`P-11 "${infinity}"`, async () => {
      await flagged({ duration_ms: infinity, method: 'GET', path: '/api/v1' }, 'invalid event: value cannot be infinity');
    });
  }

  test('P-12 a non-numeric string', async () => {
    await flagged({ duration_ms: 'not a number', method: 'GET', path: '/api/v1' }, 'invalid event: value cannot be parsed as float64: not a number');
  });

  test('P-13 a boolean or an object is an unsupported value type', async () => {
    for (const value of [true, { ms: 1 }]) {
      const { subject, item } = await ingestFor(SUM, { duration_ms: value });
      const messages = messagesOf(item);
      assert.equal(messages.length, 1);
      assert.match(messages[0], /^invalid event: unsupported value property type/);
      assert.equal(await rowOf(SUM.key, subject), undefined, 'ignored by sum');
    }
  });

  test('P-14 count meters never flag an event, whatever its data', async () => {
    for (const data of [null, undefined, { duration_ms: 'NaN' }]) {
      const row = await parsed(COUNT, data);
      assert.equal(row.value, '1');
    }
  });

  test('P-15 exponent and negative numeric strings parse', async () => {
    const row = await parsed(SUM, { duration_ms: '-1.5e2' });
    assert.equal(Number(row.value), -150);
  });
});
