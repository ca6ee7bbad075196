/**
 * OpenMeter catalogue §7.7 (event listing), ported to Tollgate's `GET /events`: newest event
 * time first, cursor-paginated, filters subject, type, source, id, from, to; items
 * `{event, ingested_at, stored_at, validation_errors}`. Customers (EVL-01's customerId) do not exist in
 * Tollgate; the 32-day look-back limit of OpenMeter v1 (EVL-03) gives way to the whole retention.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { assertProblem, DAY, event, iso, MeteringApi, meteringConfig, MINUTE, unique } from './catalogue-support.ts';

let gateway: TestGateway;
let api: MeteringApi;

before(async () => {
  gateway = await startGateway(meteringConfig());
  api = await MeteringApi.connect(gateway.https);
});
after(() => gateway?.stop());

const ids = (items: { event: Record<string, any> }[]) => items.map((item) => item.event.id);

describe('§7.7 event listing', () => {
  test('EVL-01/02 a subject filter returns exactly that subject\'s event; from=now-1m returns all three', async () => {
    const type = unique('evl01');
    const base = Date.now() - 10_000;
    const subjects = ['K', 'S1', 'S2'].map((s) => unique(s.toLowerCase()));
    const events = subjects.map((subject, i) => event({ type, subject, time: new Date(base + i).toISOString() }));
    await api.ingestOk(events);
    const recent = await api.eventsWhen({ type, from: iso(Date.now() - MINUTE) }, 3);
    assert.deepEqual(new Set(ids(recent)), new Set(ids(events.map((e) => ({ event: e })))));
    for (const [i, subject] of subjects.entries()) {
      const items = await api.listAllEvents({ subject });
      assert.deepEqual(ids(items), [events[i].id], subject);
      assert.equal(items[0].event.subject, subject);
    }
  });

  test('EVL-03 (adapted) listing reaches back beyond 32 days, within retention', async () => {
    const old = event({ time: iso(Date.now() - 100 * DAY), subject: unique('old') });
    await api.ingestOk(old);
    const items = await api.eventsWhen({ subject: old.subject, from: iso(Date.now() - 101 * DAY) }, 1);
    assert.deepEqual(ids(items), [old.id]);
  });

  test('EVL-04 a page size above 100 or below 1 is rejected', async () => {
    assertProblem(await api.listEvents({ 'page[size]': '101' }), 400);
    assertProblem(await api.listEvents({ 'page[size]': '0' }), 400);
  });

  test('EVL-05 events are listed newest event time first, whatever the ingestion order', async () => {
    const type = unique('evl05');
    const base = Date.now() - 60 * MINUTE;
    const offsets = [3, 0, 5, 1, 4, 2];
    for (const offset of offsets) await api.ingestOk(event({ type, time: iso(base + offset * MINUTE), data: { offset } }));
    const items = await api.eventsWhen({ type }, offsets.length);
    assert.deepEqual(items.map((item) => item.event.data.offset), [5, 4, 3, 2, 1, 0]);
  });

  test('items carry the CloudEvent, ingested_at and stored_at', async () => {
    const e = event({ subject: unique('shape'), data: { a: 1 } });
    const before = Date.now();
    await api.ingestOk(e);
    const [item] = await api.eventsWhen({ id: e.id }, 1);
    assert.ok(item, 'listed');
    assert.equal(item.event.specversion, '1.0');
    for (const field of ['id', 'source', 'type', 'subject']) assert.equal(item.event[field], e[field], field);
    assert.deepEqual(item.event.data, { a: 1 });
    const ingestedAt = Date.parse(item.ingested_at);
    const storedAt = Date.parse(item.stored_at);
    assert.ok(ingestedAt >= Math.floor(before / 1000) * 1000, `ingested_at ${item.ingested_at}`);
    assert.ok(storedAt >= ingestedAt - 1000, `stored_at ${item.stored_at} not before ingestion`);
  });

  test('filters by type, source and id combine (AND)', async () => {
    const type = unique('filters');
    const shared = unique('id');
    const a = event({ type, source: 'src-a', id: shared });
    const b = event({ type, source: 'src-b', id: shared });
    const c = event({ type, source: 'src-a' });
    await api.ingestOk([a, b, c]);
    await api.eventsWhen({ type }, 3);
    assert.deepEqual(new Set(ids(await api.listAllEvents({ type, source: 'src-a' }))), new Set([a.id, c.id]));
    assert.equal((await api.listAllEvents({ type, id: shared })).length, 2);
    const exact = await api.listAllEvents({ type, source: 'src-b', id: shared });
    assert.equal(exact.length, 1);
    assert.equal(exact[0].event.source, 'src-b');
  });

  test('from is inclusive and to exclusive', async () => {
    const type = unique('range');
    const base = Math.floor((Date.now() - 30 * MINUTE) / 1000) * 1000;
    const events = [0, 1, 2].map((m) => event({ type, time: iso(base + m * MINUTE), data: { m } }));
    await api.ingestOk(events);
    await api.eventsWhen({ type }, 3);
    const items = await api.listAllEvents({ type, from: iso(base + MINUTE), to: iso(base + 2 * MINUTE) });
    assert.deepEqual(items.map((item) => item.event.data.m), [1]);
    const fromFirst = await api.listAllEvents({ type, from: iso(base) });
    assert.deepEqual(fromFirst.map((item) => item.event.data.m), [2, 1, 0]);
  });

  test('the cursor walks every event once, in order', async () => {
    const type = unique('cursor');
    const base = Date.now() - 2 * DAY;
    const events = Array.from({ length: 25 }, (_, i) => event({ type, time: iso(base + i * 1000), data: { i } }));
    await api.ingestOk(events);
    await api.eventsWhen({ type }, 25);
    const walked = await api.listAllEvents({ type }, 10);
    assert.deepEqual(walked.map((item) => item.event.data.i), Array.from({ length: 25 }, (_, i) => 24 - i));
  });

  test('validation errors follow the live meters: one per matching meter that cannot use the event', async () => {
    const type = unique('errors');
    const e = event({ type, data: {} });
    await api.ingestOk(e);
    const messages = async () => ((await api.eventsWhen({ id: e.id }, 1))[0].validation_errors ?? []).map((error) => error.message).sort();
    assert.deepEqual(await messages(), []);
    await api.createMeterOk({ key: `${type}_sum`, name: 'sum', event_type: type, aggregation: 'sum', value_property: '$.v' });
    await api.createMeterOk({ key: `${type}_max`, name: 'max', event_type: type, aggregation: 'max', value_property: '$.w' });
    await api.createMeterOk({ key: `${type}_count`, name: 'count', event_type: type, aggregation: 'count' });
    assert.deepEqual(await messages(), ['invalid event: missing value property: "$.v"', 'invalid event: missing value property: "$.w"']);
    assert.equal((await api.deleteMeter(`${type}_sum`)).status, 204);
    assert.deepEqual(await messages(), ['invalid event: missing value property: "$.w"']);
  });

  test('two meters that cannot use an event for the same reason give two validation errors (one per meter)', async () => {
    const type = unique('twice');
    await api.createMeterOk({ key: `${type}_sum`, name: 'sum', event_type: type, aggregation: 'sum', value_property: '$.v' });
    await api.createMeterOk({ key: `${type}_avg`, name: 'avg', event_type: type, aggregation: 'avg', value_property: '$.w' });
    const e = event({ type, data: null });
    await api.ingestOk(e);
    const [item] = await api.eventsWhen({ id: e.id }, 1);
    assert.deepEqual((item.validation_errors ?? []).map((error) => error.message), [
      'invalid event: null and missing value property',
      'invalid event: null and missing value property',
    ]);
  });

  test('an invalid from is rejected', async () => {
    assertProblem(await api.listEvents({ from: 'last week' }), 400);
  });
});
