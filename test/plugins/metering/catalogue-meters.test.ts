/**
 * OpenMeter catalogue §7.3 (meter definitions and management), ported to Tollgate's v3 meters API
 * (INTERFACE §5: 201 on create, 409 on a live duplicate key, PUT changes only name/description/dimensions,
 * DELETE is a soft delete with 204). Cases about features, entitlements, namespaces and the configurable
 * reserved event types (MV-14, MV-24, MV-25) have no counterpart in Tollgate and are not ported.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { assertProblem, event, MeteringApi, meteringConfig, rows, unique } from './catalogue-support.ts';

const ULID = /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/;

let gateway: TestGateway;
let api: MeteringApi;

before(async () => {
  gateway = await startGateway(
    meteringConfig({
      meters: [{ key: 'tokens_total', name: 'AI Token Usage', event_type: 'prompt', aggregation: 'sum', value_property: '$.tokens', dimensions: { model: '$.model', type: '$.type' } }],
    }),
  );
  api = await MeteringApi.connect(gateway.https);
});
after(() => gateway?.stop());

/** A valid create body with a fresh key; `fields` override or (with undefined) remove fields. */
function meter(fields: Record<string, unknown> = {}): Record<string, unknown> {
  const key = unique('meter');
  const body: Record<string, unknown> = { key, name: key, event_type: key, aggregation: 'sum', value_property: '$.my_property', ...fields };
  for (const [name, value] of Object.entries(body)) if (value === undefined) delete body[name];
  return body;
}

/** A 400 problem that names `field` and whose text carries the upstream message. */
async function rejected(body: Record<string, unknown>, field: string, message: RegExp): Promise<void> {
  const res = await api.createMeter(body);
  assertProblem(res, 400, field);
  assert.match(res.text, message);
}

describe('§7.3 meter validation', () => {
  test('MV-01 sum with value property and a dimension is created', async () => {
    const created = await api.createMeterOk(meter({ dimensions: { test_group: '$.test_group' } }));
    assert.equal(created.aggregation, 'sum');
    assert.equal(created.value_property, '$.my_property');
    assert.deepEqual(created.dimensions, { test_group: '$.test_group' });
  });

  test('MV-02 sum without dimensions is created', async () => {
    const created = await api.createMeterOk(meter());
    assert.ok(created.dimensions === undefined || created.dimensions === null || Object.keys(created.dimensions).length === 0);
  });

  test('MV-03 count without value property, with a dimension, is created', async () => {
    const created = await api.createMeterOk(meter({ aggregation: 'count', value_property: undefined, dimensions: { test_group: '$.test_group' } }));
    assert.equal(created.aggregation, 'count');
    assert.ok(created.value_property === undefined || created.value_property === null);
  });

  test('MV-04 count with a value property is rejected', async () => {
    await rejected(meter({ aggregation: 'count' }), 'value_property', /not allowed when the aggregation is count/);
  });

  test('MV-05 a missing or empty key is rejected', async () => {
    assertProblem(await api.createMeter(meter({ key: undefined })), 400, 'key');
    assertProblem(await api.createMeter(meter({ key: '' })), 400, 'key');
  });

  test('MV-06 a missing aggregation is rejected', async () => {
    assertProblem(await api.createMeter(meter({ aggregation: undefined })), 400, 'aggregation');
  });

  test('MV-06b an unknown aggregation is rejected', async () => {
    assertProblem(await api.createMeter(meter({ aggregation: 'median' })), 400, 'aggregation');
  });

  test('MV-07 a missing or empty event type is rejected', async () => {
    assertProblem(await api.createMeter(meter({ event_type: undefined })), 400, 'event_type');
    assertProblem(await api.createMeter(meter({ event_type: '' })), 400, 'event_type');
  });

  test('MV-08 sum without a value property is rejected', async () => {
    await rejected(meter({ value_property: undefined }), 'value_property', /required when the aggregation is not count/);
  });

  test('MV-09 a value property not starting with $ is rejected', async () => {
    await rejected(meter({ value_property: 'invalid' }), 'value_property', /must start with \$/);
  });

  test('MV-10 a dimension name with a dash is rejected', async () => {
    await rejected(meter({ dimensions: { 'in-valid': '$.x' } }), 'dimensions', /in-valid is invalid, only alphanumeric and underscore characters are allowed/);
  });

  test('MV-11 an empty dimension name is rejected', async () => {
    await rejected(meter({ dimensions: { '': '$.x' } }), 'dimensions', /cannot be empty/);
  });

  test('MV-12 a dimension path not starting with $ is rejected', async () => {
    await rejected(meter({ dimensions: { test_group: 'invalid' } }), 'dimensions', /must start with \$ for key test_group/);
  });

  test('MV-13 a dimension equal to the value property is rejected', async () => {
    await rejected(
      meter({ aggregation: 'unique_count', value_property: '$.my_property', dimensions: { test_group: '$.my_property' } }),
      'dimensions',
      /test_group cannot be the same as value property/,
    );
  });

  test('MV-15 keys outside ^[a-z0-9]+(_[a-z0-9]+)*$ or longer than 64 are rejected; 64 is fine', async () => {
    assertProblem(await api.createMeter(meter({ key: 'Tokens-Total' })), 400, 'key');
    assertProblem(await api.createMeter(meter({ key: 'a'.repeat(65) })), 400, 'key');
    assertProblem(await api.createMeter(meter({ key: 'double__underscore' })), 400, 'key');
    await api.createMeterOk(meter({ key: unique('k').replace('_', '').padEnd(64, '0') }));
  });

  test('MV-16 a second live meter with the key of a declared meter is a 409 conflict', async () => {
    assertProblem(await api.createMeter(meter({ key: 'tokens_total' })), 409);
    const key = unique('dup');
    await api.createMeterOk(meter({ key }));
    assertProblem(await api.createMeter(meter({ key })), 409);
  });

  test('MV-17 (v3) a create without name is rejected', async () => {
    assertProblem(await api.createMeter(meter({ name: undefined })), 400, 'name');
  });

  test('MV-18 a create with all fields answers 201 with the meter', async () => {
    const body = {
      key: unique('full'),
      name: 'Full meter',
      description: 'All the fields',
      event_type: unique('full_event'),
      aggregation: 'max',
      value_property: '$.value',
      dimensions: { region: '$.region' },
      events_from: '2026-01-01T00:00:00Z',
    };
    const created = await api.createMeterOk(body);
    assert.match(created.id, ULID);
    for (const field of ['key', 'name', 'description', 'event_type', 'aggregation', 'value_property']) {
      assert.equal(created[field], (body as any)[field], field);
    }
    assert.deepEqual(created.dimensions, body.dimensions);
    assert.equal(Date.parse(created.events_from), Date.parse(body.events_from));
    assert.ok(!Number.isNaN(Date.parse(created.created_at)), 'created_at');
    assert.ok(!Number.isNaN(Date.parse(created.updated_at)), 'updated_at');
    assert.ok(created.deleted_at === undefined || created.deleted_at === null);
  });

  test('MV-19 the reserved dimension names subject and customer_id are rejected', async () => {
    assertProblem(await api.createMeter(meter({ dimensions: { subject: '$.subject' } })), 400, 'dimensions');
    assertProblem(await api.createMeter(meter({ dimensions: { customer_id: '$.customer' } })), 400, 'dimensions');
  });

  test('MV-22 an empty description is rejected', async () => {
    await rejected(meter({ description: '' }), 'description', /must not be empty/);
  });

  test('MV-28 a value property that is not valid JSONPath is rejected', async () => {
    const res = await api.createMeter(meter({ value_property: '$.a[' }));
    assert.match(assertProblem(res, 400, 'value_property').detail, /^validation error: invalid JSONPath/);
  });

  test('the v3 create body is sealed: an unknown field is rejected', async () => {
    assertProblem(await api.createMeter(meter({ slug: 'v1_name' })), 400, 'slug');
  });

  test('name longer than 256 and description longer than 1024 are rejected', async () => {
    assertProblem(await api.createMeter(meter({ name: 'n'.repeat(257) })), 400, 'name');
    assertProblem(await api.createMeter(meter({ description: 'd'.repeat(1025) })), 400, 'description');
  });

  test('a body that is not JSON is a 400 problem', async () => {
    assertProblem(await api.send('POST', '/meters', '{"key":', { 'content-type': 'application/json' }), 400);
  });
});

describe('§7.3 meter management', () => {
  test('get by id and by key return the same meter; an unknown one is a 404 problem', async () => {
    const created = await api.createMeterOk(meter());
    const byId = await api.getMeter(created.id);
    const byKey = await api.getMeter(created.key);
    assert.equal(byId.status, 200);
    assert.equal(byKey.status, 200);
    assert.deepEqual(byId.json(), created);
    assert.deepEqual(byKey.json(), created);
    assertProblem(await api.getMeter('no_such_meter'), 404);
    assertProblem(await api.getMeter('01ARZ3NDEKTSV4RRFFQ69G5FAV'), 404);
  });

  test('the declared meter of gateway.yaml is listed and readable', async () => {
    const res = await api.getMeter('tokens_total');
    assert.equal(res.status, 200);
    const declared = res.json();
    assert.equal(declared.name, 'AI Token Usage');
    assert.equal(declared.aggregation, 'sum');
    assert.deepEqual(declared.dimensions, { model: '$.model', type: '$.type' });
    assert.match(declared.id, ULID);
  });

  test('MV-20 list pages in creation order with {data, meta: {page: {number, size, total}}}', async () => {
    const mine = [];
    for (let i = 0; i < 3; i++) mine.push((await api.createMeterOk(meter())).key);
    const seen: string[] = [];
    let total = -1;
    for (let number = 1; number < 1000; number++) {
      const res = await api.listMeters(`page[number]=${number}&page[size]=2`);
      assert.equal(res.status, 200, res.text);
      const page = res.json();
      assert.equal(page.meta.page.number, number);
      assert.equal(page.meta.page.size, 2);
      total = page.meta.page.total;
      assert.ok(page.data.length <= 2);
      seen.push(...page.data.map((m: any) => m.key));
      if (page.data.length < 2 || seen.length >= total) break;
    }
    assert.equal(seen.length, total, 'pages cover the total');
    assert.equal(new Set(seen).size, seen.length, 'no meter twice');
    const positions = mine.map((key) => seen.indexOf(key));
    assert.ok(positions.every((p) => p >= 0), 'all created meters listed');
    assert.deepEqual(positions, [...positions].sort((a, b) => a - b), 'creation order');
  });

  test('MV-21 invalid paging parameters are rejected', async () => {
    assertProblem(await api.listMeters('page[size]=abc'), 400);
    assertProblem(await api.listMeters('page[number]=0'), 400);
    assertProblem(await api.listMeters('page[size]=0'), 400);
  });

  test('MV-23 delete is soft: 404 by key, readable by id with deleted_at, unlisted, key reusable, events kept', async () => {
    const type = unique('deleted');
    const first = await api.createMeterOk({ key: type, name: type, event_type: type, aggregation: 'count' });
    await api.ingestOk([event({ type }), event({ type })]);
    assert.equal(await api.totalWhen(type, 2), 2);

    const res = await api.deleteMeter(type);
    assert.equal(res.status, 204);
    assert.equal(res.body.length, 0);
    assertProblem(await api.getMeter(type), 404);
    assertProblem(await api.query(type, {}), 404);
    const byId = await api.getMeter(first.id);
    assert.equal(byId.status, 200);
    assert.ok(!Number.isNaN(Date.parse(byId.json().deleted_at)), 'deleted_at set');
    const listed = await api.listMeters('page[size]=1000');
    assert.ok(!listed.json().data.some((m: any) => m.id === first.id), 'not listed');

    const again = await api.createMeterOk({ key: type, name: type, event_type: type, aggregation: 'count' });
    assert.notEqual(again.id, first.id);
    assert.equal(await api.totalWhen(type, 2), 2, 'the events outlived the deleted meter');
  });

  test('delete of an unknown meter is a 404 problem', async () => {
    assertProblem(await api.deleteMeter('never_existed'), 404);
  });

  test('MV-26 PUT changes name, description and dimensions; new dimensions apply to old events', async () => {
    const type = unique('put');
    await api.createMeterOk({ key: type, name: 'Before', event_type: type, aggregation: 'sum', value_property: '$.v', dimensions: { method: '$.method' } });
    await api.ingestOk([
      event({ type, data: { v: 1, method: 'GET', path: '/a' } }),
      event({ type, data: { v: 2, method: 'GET', path: '/b' } }),
    ]);
    const res = await api.updateMeter(type, { name: 'After', description: 'now by path', dimensions: { method: '$.method', path: '$.path' } });
    assert.equal(res.status, 200, res.text);
    const updated = res.json();
    assert.equal(updated.name, 'After');
    assert.equal(updated.description, 'now by path');
    assert.deepEqual(updated.dimensions, { method: '$.method', path: '$.path' });
    assert.ok(Date.parse(updated.updated_at) >= Date.parse(updated.created_at));

    const byPath = await api.queryWhen(type, { group_by_dimensions: ['path'] }, (r) => r.data.length >= 2);
    const values = Object.fromEntries(byPath.data.map((row) => [row.dimensions.path, Number(row.value)]));
    assert.deepEqual(values, { '/a': 1, '/b': 2 });
  });

  test('MV-27 (v3) PUT is a replacement: without name it is rejected, without dimensions they are cleared', async () => {
    const type = unique('replace');
    await api.createMeterOk({ key: type, name: 'Kept', event_type: type, aggregation: 'count', dimensions: { model: '$.model' } });
    assertProblem(await api.updateMeter(type, { description: 'no name' }), 400, 'name');
    assert.equal((await api.getMeter(type)).json().name, 'Kept');
    const res = await api.updateMeter(type, { name: 'Kept' });
    assert.equal(res.status, 200, res.text);
    const dimensions = res.json().dimensions;
    assert.ok(dimensions === undefined || dimensions === null || Object.keys(dimensions).length === 0, 'dimensions cleared');
  });

  test('PUT cannot change key, event type, aggregation or value property', async () => {
    const type = unique('immutable');
    const created = await api.createMeterOk({ key: type, name: type, event_type: type, aggregation: 'sum', value_property: '$.v' });
    const res = await api.updateMeter(type, { name: type, key: 'other_key', event_type: 'other', aggregation: 'max', value_property: '$.w' });
    assert.ok(res.status === 200 || res.status === 400, `answered ${res.status}`);
    const now = (await api.getMeter(created.id)).json();
    assert.equal(now.key, type);
    assert.equal(now.event_type, type);
    assert.equal(now.aggregation, 'sum');
    assert.equal(now.value_property, '$.v');
  });

  test('PUT validates dimensions like create and 404s an unknown meter', async () => {
    const created = await api.createMeterOk(meter());
    assertProblem(await api.updateMeter(created.key, { name: 'x', dimensions: { 'in-valid': '$.x' } }), 400, 'dimensions');
    assertProblem(await api.updateMeter('never_existed', { name: 'x' }), 404);
  });

  test('a meter with events_from ignores older events (QRY-27 shape)', async () => {
    const type = unique('from');
    const cut = Date.now() - 60 * 60_000;
    await api.createMeterOk({ key: type, name: type, event_type: type, aggregation: 'count', events_from: new Date(cut).toISOString() });
    await api.ingestOk([event({ type, time: new Date(cut - 60_000).toISOString() }), event({ type, time: new Date(cut + 60_000).toISOString() })]);
    const result = await api.queryWhen(type, {}, (r) => r.data.length > 0 && Number(r.data[0].value) >= 1);
    assert.deepEqual(rows(result).map((r) => r.value), [1]);
  });
});
