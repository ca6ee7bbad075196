/**
 * Meter management through a real gateway: create with the reference's validation messages, 409 on a
 * live duplicate key, list with paging and sorting, get by id or key, update (only name, description,
 * dimensions; new dimensions re-aggregate stored events), soft delete, meters of gateway.yaml
 * (read-only, created at start and after a reload).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { randomUUID } from 'node:crypto';
import { request, startGateway, type TestGateway } from '../../helpers/gateway.ts';

const PATH = '/v3/metering';

function config(meters: Record<string, unknown>[] = []) {
  return {
    routes: [{ name: 'metering', paths: [PATH], protocols: ['http'], strip_path: false, plugins: [{ name: 'metering', config: { allow_unauthenticated: true } }] }],
    meters,
  };
}

function ce(fields: Record<string, unknown> = {}) {
  return { specversion: '1.0', id: randomUUID(), source: 'impl-test', type: 'impl', subject: 'acme', time: new Date().toISOString(), ...fields };
}

describe('metering meters', () => {
  let gw: TestGateway;
  let base: string;
  const call = (method: string, path: string, body?: unknown) =>
    request(base + path, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  const create = (body: Record<string, unknown>) => call('POST', '/meters', body);

  before(async () => {
    gw = await startGateway(config([{ key: 'declared_calls', event_type: 'declared', aggregation: 'count' }]));
    base = gw.http + PATH;
  });
  after(() => gw.stop());

  const reasonsOf = (res: { json(): any }) => res.json().invalid_parameters.map((p: any) => p.reason).join('\n');

  test('validation messages of the reference, all problems at once', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ key: 'a', name: 'A', event_type: 't', aggregation: 'count', value_property: '$.v' }, /meter value property is not allowed when the aggregation is count/],
      [{ key: 'a', name: 'A', event_type: 't', aggregation: 'sum' }, /meter value property is required when the aggregation is not count/],
      [{ key: 'a', name: 'A', event_type: 't', aggregation: 'sum', value_property: 'v' }, /meter value property must start with \$/],
      [{ key: 'a', name: 'A', event_type: 't', aggregation: 'sum', value_property: '$.a[' }, /invalid JSONPath/],
      [{ key: 'a', name: 'A', event_type: 't', aggregation: 'count', dimensions: { 'in-valid': '$.x' } }, /meter group by key in-valid is invalid, only alphanumeric and underscore characters are allowed/],
      [{ key: 'a', name: 'A', event_type: 't', aggregation: 'count', dimensions: { g: 'x' } }, /meter group by value must start with \$ for key g/],
      [{ key: 'a', name: 'A', event_type: 't', aggregation: 'unique_count', value_property: '$.v', dimensions: { g: '$.v' } }, /meter group by value g cannot be the same as value property/],
      [{ key: 'a', name: 'A', event_type: 't', aggregation: 'count', dimensions: { subject: '$.s' } }, /subject is reserved/],
      [{ key: 'a', name: 'A', event_type: 't', aggregation: 'count', description: '' }, /description must not be empty string/],
      [{ key: 'Not-Valid', name: 'A', event_type: 't', aggregation: 'count' }, /must match pattern/],
      [{ key: 'a', name: 'A', event_type: 't', aggregation: 'median' }, /must be one of/],
      [{ key: 'a', name: 'A', event_type: 't', aggregation: 'count', unexpected: 1 }, /unknown property/],
    ];
    for (const [body, message] of cases) {
      const res = await create(body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.match(String(res.headers['content-type']), /^application\/problem\+json/);
      assert.match(reasonsOf(res), message);
      assert.match(res.json().detail, /^validation error: /);
    }
    const all = await create({ name: 'x' });
    const reasons = reasonsOf(all);
    assert.match(reasons, /key is required/);
    assert.match(reasons, /meter aggregation is required/);
    assert.match(reasons, /meter event type is required/);
    assert.match(reasonsOf(await create({ key: 'nameless', event_type: 't', aggregation: 'count' })), /name is required/);
  });

  test('create 201, duplicate key 409, get by id and key, list with paging and sort', async () => {
    const created = await create({ key: 'tokens_total', name: 'AI Token Usage', event_type: 'prompt', aggregation: 'sum', value_property: '$.tokens', dimensions: { model: '$.model' }, events_from: '2024-01-01T01:00:00+01:00' });
    assert.equal(created.status, 201, created.text);
    const meter = created.json();
    assert.match(meter.id, /^[0-7][0-9A-HJKMNP-TV-Z]{25}$/);
    assert.equal(meter.events_from, '2024-01-01T00:00:00Z');
    assert.equal(meter.aggregation, 'sum');
    const dup = await create({ key: 'tokens_total', name: 'again', event_type: 'x', aggregation: 'count' });
    assert.equal(dup.status, 409);
    assert.match(dup.json().detail, /meter with the same slug already exists/);
    assert.deepEqual((await call('GET', `/meters/${meter.id}`)).json(), meter);
    assert.deepEqual((await call('GET', '/meters/tokens_total')).json(), meter);
    assert.equal((await call('GET', '/meters/nope')).status, 404);
    assert.match((await call('GET', '/meters/nope')).json().detail, /meter not found: nope/);

    await create({ key: 'zz_last', name: 'A first by name', event_type: 'x', aggregation: 'count' });
    const page = (await call('GET', '/meters?page[size]=1&page[number]=2&sort=key')).json();
    assert.equal(page.meta.page.total, 3);
    assert.equal(page.meta.page.size, 1);
    assert.equal(page.data[0].key, 'tokens_total');
    const byName = (await call('GET', '/meters?sort=name')).json().data.map((m: any) => m.key);
    assert.deepEqual(byName, ['zz_last', 'tokens_total', 'declared_calls']);
    const desc = (await call('GET', '/meters?sort=key%20desc')).json().data.map((m: any) => m.key);
    assert.deepEqual(desc, ['zz_last', 'tokens_total', 'declared_calls']);
    assert.equal((await call('GET', '/meters?sort=color')).status, 400);
  });

  test('update changes name, description and dimensions only; new dimensions apply to stored events', async () => {
    const res = await create({ key: 'requests', name: 'Requests', event_type: 'req', aggregation: 'count', dimensions: { method: '$.method' } });
    const meter = res.json();
    const send = (events: unknown[]) => request(base + '/events', { method: 'POST', headers: { 'content-type': 'application/cloudevents-batch+json' }, body: JSON.stringify(events) });
    assert.equal((await send([ce({ type: 'req', data: { method: 'GET', path: '/a' } }), ce({ type: 'req', data: { method: 'GET', path: '/b' } })])).status, 202);
    const immutable = await call('PUT', '/meters/requests', { name: 'R', aggregation: 'sum' });
    assert.equal(immutable.status, 400);
    const updated = await call('PUT', `/meters/${meter.id}`, { name: 'Renamed', description: 'all requests', dimensions: { method: '$.method', path: '$.path' } });
    assert.equal(updated.status, 200, updated.text);
    const body = updated.json();
    assert.equal(body.name, 'Renamed');
    assert.equal(body.description, 'all requests');
    assert.equal(body.event_type, 'req');
    assert.deepEqual(body.dimensions, { method: '$.method', path: '$.path' });
    const q = await call('POST', '/meters/requests/query', { group_by_dimensions: ['path'] });
    assert.equal(q.status, 200, q.text);
    assert.deepEqual(q.json().data.map((r: any) => [r.dimensions.path, r.value]).sort(), [['/a', '1'], ['/b', '1']]);
    assert.equal((await call('PUT', '/meters/requests', { description: 'no name' })).status, 400);
  });

  test('delete is soft: 204, then 404 by key, still readable by id, key reusable, events kept', async () => {
    const meter = (await create({ key: 'doomed', name: 'Doomed', event_type: 'doom', aggregation: 'count' })).json();
    const e = ce({ type: 'doom' });
    await request(base + '/events', { method: 'POST', headers: { 'content-type': 'application/cloudevents+json' }, body: JSON.stringify(e) });
    const del = await call('DELETE', '/meters/doomed');
    assert.equal(del.status, 204);
    assert.equal(del.body.length, 0);
    assert.equal((await call('GET', '/meters/doomed')).status, 404);
    const byId = (await call('GET', `/meters/${meter.id}`)).json();
    assert.ok(byId.deleted_at);
    assert.ok(!(await call('GET', '/meters')).json().data.some((m: any) => m.key === 'doomed'));
    assert.ok((await call('GET', '/meters?include_deleted=true')).json().data.some((m: any) => m.key === 'doomed'));
    const again = await create({ key: 'doomed', name: 'Back', event_type: 'doom', aggregation: 'count' });
    assert.equal(again.status, 201);
    assert.notEqual(again.json().id, meter.id);
    const q = (await call('POST', '/meters/doomed/query', {})).json();
    assert.equal(q.data[0].value, '1', 'the stored event is counted by the new meter');
    assert.equal((await call('GET', `/events?id=${e.id}`)).json().data.length, 1);
  });

  test('gateway.yaml meters are listed, read-only, and follow a reload', async () => {
    const declared = (await call('GET', '/meters/declared_calls')).json();
    assert.equal(declared.name, 'declared_calls');
    assert.equal((await call('DELETE', '/meters/declared_calls')).status, 405);
    assert.equal((await call('PUT', '/meters/declared_calls', { name: 'x' })).status, 405);
    await request(base + '/events', { method: 'POST', headers: { 'content-type': 'application/cloudevents+json' }, body: JSON.stringify(ce({ type: 'declared' })) });
    assert.ok(await gw.reload(config([{ key: 'declared_calls', name: 'Declared calls', event_type: 'declared', aggregation: 'count' }, { key: 'late_sum', name: 'Late', event_type: 'declared', aggregation: 'count' }])));
    const renamed = (await call('GET', '/meters/declared_calls')).json();
    assert.equal(renamed.name, 'Declared calls');
    assert.equal(renamed.id, declared.id);
    const late = await call('POST', '/meters/late_sum/query', {});
    assert.equal(late.json().data[0].value, '1', 'a meter added by reload covers stored events');
    assert.ok(await gw.reload(config([])));
    assert.equal((await call('GET', '/meters/declared_calls')).status, 404);
  });

  test('unknown paths and methods are problems', async () => {
    assert.equal((await call('GET', '/nothing')).status, 404);
    const res = await call('PATCH', '/meters');
    assert.equal(res.status, 405);
    assert.match(String(res.headers.allow), /GET/);
  });
});
