/**
 * Event listing (newest first, filters, cursor paging, per-meter validation errors) and the
 * optional per-operation scopes enforced from the oauth2 token (on the v3 and the OpenMeter v1 paths); the config check that refuses a
 * metering route without authentication.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { randomUUID } from 'node:crypto';
import { request, startGateway, type TestGateway } from '../../helpers/gateway.ts';

const PATH = '/v3/metering';

function ce(fields: Record<string, unknown>) {
  return { specversion: '1.0', id: randomUUID(), source: 'impl-list', type: 'listed', subject: 'acme', time: new Date().toISOString(), ...fields };
}

describe('metering event listing', () => {
  let gw: TestGateway;
  let base: string;
  const get = (path: string) => request(base + path, {});
  const post = (path: string, body: unknown, type = 'application/json') => request(base + path, { method: 'POST', headers: { 'content-type': type }, body: JSON.stringify(body) });
  const now = Date.now();
  const minutesAgo = (m: number) => new Date(now - m * 60_000).toISOString();

  before(async () => {
    gw = await startGateway({
      routes: [{ name: 'metering', paths: [PATH], protocols: ['http'], strip_path: false, plugins: [{ name: 'metering', config: { allow_unauthenticated: true } }] }],
    });
    base = gw.http + PATH;
    assert.equal((await post('/meters', { key: 'listed_sum', name: 'sum', event_type: 'listed', aggregation: 'sum', value_property: '$.duration_ms' })).status, 201);
    assert.equal((await post('/meters', { key: 'listed_count', name: 'count', event_type: 'listed', aggregation: 'count' })).status, 201);
  });
  after(() => gw.stop());

  test('newest event time first, with stored and ingested times and per-meter validation errors', async () => {
    const subject = `list-${randomUUID()}`;
    const datas: unknown[] = [null, undefined, {}, { duration_ms: 'NaN' }, { duration_ms: 'Inf' }, { duration_ms: null }, { duration_ms: 'abc' }, { duration_ms: true }, { duration_ms: '100' }];
    const events = datas.map((data, i) => {
      const e: Record<string, unknown> = ce({ subject, time: minutesAgo(datas.length - i) });
      if (data !== undefined) e.data = data;
      return e;
    });
    assert.equal((await post('/events', events, 'application/cloudevents-batch+json')).status, 202);
    const page = (await get(`/events?subject=${subject}`)).json();
    assert.equal(page.data.length, datas.length);
    const messages = page.data.map((item: any) => item.validation_errors.map((v: any) => v.message).join('|'));
    assert.deepEqual(messages, [
      '',
      'invalid event: unsupported value property type: bool',
      'invalid event: value cannot be parsed as float64: abc',
      'invalid event: value cannot be null',
      'invalid event: value cannot be infinity',
      'invalid event: value cannot be NaN',
      'invalid event: missing value property: "$.duration_ms"',
      'invalid event: null and missing value property',
      'invalid event: null and missing value property',
    ]);
    for (const item of page.data) {
      for (const v of item.validation_errors) assert.equal(v.code, 'validation_error');
      assert.ok(Date.parse(item.stored_at) >= Date.parse(item.ingested_at));
      assert.equal(item.event.specversion, '1.0');
    }
    const times = page.data.map((item: any) => Date.parse(item.event.time));
    assert.deepEqual(times, [...times].sort((a, b) => b - a));
    assert.deepEqual(page.data[0].event.data, { duration_ms: '100' });
  });

  test('filters by subject, type, source, id and time range; cursor paging returns every event once', async () => {
    const subject = `page-${randomUUID()}`;
    const events = Array.from({ length: 25 }, (_, i) => ce({ subject, source: i % 2 ? 'odd' : 'even', time: minutesAgo(100 - i) }));
    assert.equal((await post('/events', events, 'application/cloudevents-batch+json')).status, 202);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res = await get(`/events?subject=${subject}&page[size]=10${cursor ? `&page[after]=${cursor}` : ''}`);
      assert.equal(res.status, 200, res.text);
      const page = res.json();
      seen.push(...page.data.map((item: any) => item.event.id));
      cursor = page.meta.page.next;
    } while (cursor);
    assert.equal(seen.length, 25);
    assert.deepEqual(seen, events.map((e) => e.id).reverse());
    assert.equal((await get(`/events?subject=${subject}&source=odd`)).json().data.length, 12);
    assert.equal((await get(`/events?filter[subject]=${subject}&filter[source][eq]=even`)).json().data.length, 13);
    assert.equal((await get(`/events?id=${events[3].id}`)).json().data[0].event.id, events[3].id);
    assert.equal((await get(`/events?subject=${subject}&type=other`)).json().data.length, 0);
    const from = encodeURIComponent(minutesAgo(90));
    const to = encodeURIComponent(minutesAgo(80));
    assert.equal((await get(`/events?subject=${subject}&from=${from}&to=${to}`)).json().data.length, 10);
  });

  test('bad listing parameters are 400 problems', async () => {
    for (const q of ['page[size]=0', 'page[size]=101', 'from=yesterday', `from=${encodeURIComponent(minutesAgo(1))}&to=${encodeURIComponent(minutesAgo(5))}`, 'page[after]=garbage']) {
      const res = await get(`/events?${q}`);
      assert.equal(res.status, 400, q);
      assert.ok(res.json().invalid_parameters.length > 0);
    }
  });
});

describe('metering scopes and authentication', () => {
  const CLIENT = { client_id: 'scoped-app', client_secret: 'scoped-secret-0123456789abcdef' };
  let gw: TestGateway;

  before(async () => {
    gw = await startGateway({
      routes: [{
        name: 'metering', paths: [PATH], protocols: ['https'], strip_path: false,
        plugins: [
          { name: 'oauth2', config: { enable_client_credentials: true, global_credentials: true, scopes: ['events:write', 'meters:write', 'usage:read', 'billing:write'] } },
          { name: 'metering', config: { scopes: { ingest: 'events:write', manage: 'meters:write', read: 'usage:read', billing: 'billing:write' } } },
        ],
      }],
      consumers: [{ username: 'app', oauth2_credentials: [{ name: 'Scoped app', ...CLIENT }] }],
    });
  });
  after(() => gw.stop());

  const token = async (scope: string) => {
    const res = await request(`${gw.https}${PATH}/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'client_credentials', scope, ...CLIENT }).toString(),
    });
    assert.equal(res.status, 200, res.text);
    return res.json().access_token as string;
  };
  const call = (t: string | null, method: string, path: string, body?: unknown, type = 'application/json') =>
    request(`${gw.https}${PATH}${path}`, { method, headers: { 'content-type': type, ...(t ? { authorization: `Bearer ${t}` } : {}) }, body: body === undefined ? undefined : JSON.stringify(body) });

  test('each operation needs its scope; a producer token can only ingest', async () => {
    const producer = await token('events:write');
    const operator = await token('meters:write usage:read');
    assert.equal((await call(null, 'POST', '/events', ce({}), 'application/cloudevents+json')).status, 401);
    assert.equal((await call(producer, 'POST', '/events', ce({ type: 'scoped' }), 'application/cloudevents+json')).status, 202);
    const denied = await call(producer, 'POST', '/meters', { key: 'scoped', name: 'Scoped', event_type: 'scoped', aggregation: 'count' });
    assert.equal(denied.status, 403);
    assert.match(String(denied.headers['content-type']), /^application\/problem\+json/);
    assert.match(denied.json().detail, /meters:write/);
    assert.equal((await call(producer, 'GET', '/events')).status, 403);
    assert.equal((await call(operator, 'POST', '/events', ce({}), 'application/cloudevents+json')).status, 403);
    assert.equal((await call(operator, 'POST', '/meters', { key: 'scoped', name: 'Scoped', event_type: 'scoped', aggregation: 'count' })).status, 201);
    const q = await call(operator, 'POST', '/meters/scoped/query', {});
    assert.equal(q.status, 200, q.text);
    assert.equal(q.json().data[0].value, '1');
    assert.equal((await call(operator, 'GET', '/events?type=scoped')).json().data.length, 1);
  });

  test('OpenMeter\'s v1 paths need the same scopes as their v3 counterparts', async () => {
    const producer = await token('events:write');
    const operator = await token('meters:write usage:read');
    const biller = await token('billing:write');
    assert.equal((await call(producer, 'POST', '/api/v1/events', [ce({ type: 'v1-scoped' })], 'application/cloudevents-batch+json')).status, 204);
    const denied = await call(producer, 'GET', '/api/v1/meters');
    assert.equal(denied.status, 403);
    assert.equal(denied.json().type, 'about:blank', 'in v1\'s problem shape');
    for (const t of [producer, operator]) assert.equal((await call(t, 'GET', '/api/v1/customers')).status, 403);
    assert.equal((await call(biller, 'GET', '/api/v1/customers')).status, 200);
    assert.equal((await call(biller, 'GET', '/api/v1/customers/nobody/access')).status, 403, 'access is read, as on v3');
    assert.equal((await call(operator, 'GET', '/api/v1/customers/nobody/access')).status, 404);
    assert.equal((await call(biller, 'POST', '/api/v1/portal/tokens', { subject: 'x' })).status, 403, 'portal tokens are managed with the manage scope');
    assert.equal((await call(operator, 'POST', '/api/v1/portal/tokens', { subject: 'x' })).status, 200);
    assert.equal((await call(operator, 'GET', '/api/v1/entitlements')).status, 200);
  });

  test('a metering route without an authentication plugin is refused unless allow_unauthenticated', async () => {
    const route = (config: Record<string, unknown>) => ({
      routes: [{ name: 'open', paths: [PATH], strip_path: false, plugins: [{ name: 'metering', config }] }],
    });
    await assert.rejects(startGateway(route({})), /allow_unauthenticated/);
    const open = await startGateway(route({ allow_unauthenticated: true }));
    await open.stop();
  });
});
