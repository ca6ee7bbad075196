/**
 * Metering and billing on the admin API (what the console reads): under /metering the admin listener
 * answers exactly what the metering route answers (same JSON, same CSV, same problem+json errors), for
 * reading only, without the route's token scopes; /metering/status shows the ingest queue, the dedupe
 * filter and backfills; without a metering route the admin paths say so.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { request, startGateway, TEST_DATABASE, type Reply, type TestGateway } from '../../helpers/gateway.ts';
import { MeteringApi, meteringConfig } from './catalogue-support.ts';

const SCOPED_PATH = '/scoped-metering';
const QUEUE_MAX = 4321;

const METERS = [
  { key: 'api_calls', name: 'API calls', event_type: 'request', aggregation: 'count', dimensions: { route: '$.route' } },
  { key: 'tokens', name: 'Tokens', event_type: 'prompt', aggregation: 'sum', value_property: '$.tokens' },
];

function config(): Record<string, any> {
  const base = meteringConfig({ meters: METERS, metering: { queue_max_events: QUEUE_MAX } }) as Record<string, any>;
  const scoped = {
    name: 'scoped-metering',
    paths: [SCOPED_PATH],
    protocols: ['https'],
    strip_path: false,
    plugins: [
      { name: 'oauth2', config: { enable_client_credentials: true, global_credentials: true } },
      { name: 'metering', config: { queue_max_events: QUEUE_MAX, scopes: { read: 'usage:read', billing: 'billing:write' } } },
    ],
  };
  return {
    ...base,
    // The scoped route first: the admin API takes its settings from the first metering route, and must still skip its scopes.
    routes: [scoped, ...base.routes],
    features: [{ key: 'api_calls', name: 'API calls', meter: { key: 'api_calls' } }],
    plans: [
      {
        key: 'starter',
        name: 'Starter',
        currency: 'USD',
        billing_cadence: 'P1M',
        phases: [
          {
            key: 'main',
            name: 'Main',
            duration: null,
            rate_cards: [
              { key: 'base_fee', name: 'Base fee', price: { type: 'flat', amount: '9' }, payment_term: 'in_advance', billing_cadence: 'P1M' },
              { key: 'api_calls', name: 'API calls', feature_key: 'api_calls', price: { type: 'unit', amount: '0.01' }, entitlement: { type: 'metered', limit: '100', usage_period: 'P1M' } },
            ],
          },
        ],
      },
    ],
    customers: [{ key: 'acme-corp', name: 'Acme Corp', usage_attribution: { subject_keys: ['acme'] }, currency: 'USD' }],
  };
}

describe('metering on the admin API', () => {
  let gw: TestGateway;
  let api: MeteringApi;
  let subscriptionId: string;
  const admin = (path: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) =>
    request(gw.admin + path, { method: init.method, headers: init.headers, body: init.body as any });

  before(async () => {
    gw = await startGateway(config());
    api = await MeteringApi.connect(gw.https);
    const now = Date.now();
    const events = ['acme', 'acme', 'acme', 'other'].map((subject, i) => ({
      specversion: '1.0', id: randomUUID(), source: 'admin-test', type: 'request', subject, time: new Date(now - i * 3_600_000 + 1000).toISOString(), data: { route: i % 2 ? '/a' : '/b' },
    }));
    await api.ingestOk(events);
    const created = await api.sendJson('POST', '/subscriptions', { customer: { key: 'acme-corp' }, plan: { key: 'starter' } });
    assert.equal(created.status, 201, created.text);
    subscriptionId = created.json().id;
  });
  after(() => gw?.stop());

  /** The same request to the route (with the producer's token) and to the admin API. */
  async function both(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<[Reply, Reply]> {
    const json: Record<string, string> = body === undefined ? {} : { 'content-type': 'application/json' };
    const text = body === undefined ? undefined : JSON.stringify(body);
    return Promise.all([api.send(method, path, text, { ...json, ...headers }), admin(`/metering${path}`, { method, body: text, headers: { ...json, ...headers } })]);
  }

  test('every read answers as the metering route does', async () => {
    const query = { granularity: 'PT1H', time_zone: 'Europe/Paris', group_by_dimensions: ['subject', 'route'] };
    const reads: [string, string, unknown?][] = [
      ['GET', '/meters'],
      ['GET', '/meters/api_calls'],
      ['POST', '/meters/api_calls/query', query],
      ['POST', '/meters/tokens/query', {}],
      ['GET', '/events?subject=acme'],
      ['GET', '/customers'],
      ['GET', '/customers/acme-corp'],
      ['GET', '/customers/acme-corp/entitlement-access'],
      ['GET', '/customers/acme-corp/upcoming-invoice'],
      ['POST', '/entitlement-access/query', { customer: { keys: ['acme'] } }],
      ['GET', '/features'],
      ['GET', '/plans?key=starter'],
      ['GET', '/subscriptions?customer=acme-corp'],
      ['GET', `/subscriptions/${subscriptionId}`],
      ['GET', '/invoices?customer=acme-corp'],
    ];
    for (const [method, path, body] of reads) {
      const [route, viaAdmin] = await both(method, path, body);
      assert.equal(route.status, 200, `${path} on the route: ${route.text}`);
      assert.equal(viaAdmin.status, 200, `${path} on the admin API: ${viaAdmin.text}`);
      assert.deepEqual(comparable(path, viaAdmin.json()), comparable(path, route.json()), path);
    }
    const usage = (await admin('/metering/meters/api_calls/query', { method: 'POST', body: JSON.stringify(query), headers: { 'content-type': 'application/json' } })).json();
    assert.equal(usage.data.reduce((n: number, row: any) => n + Number(row.value), 0), 4);
  });

  test('CSV and errors come out as on the route: text/csv, problem+json with the route\'s detail', async () => {
    const [routeCsv, adminCsv] = await both('POST', '/meters/api_calls/query', { group_by_dimensions: ['subject'] }, { accept: 'text/csv' });
    assert.equal(adminCsv.status, 200);
    assert.match(String(adminCsv.headers['content-type']), /^text\/csv/);
    assert.equal(adminCsv.text, routeCsv.text);

    const [routeMissing, adminMissing] = await both('GET', '/meters/a%2Fb');
    assert.equal(adminMissing.status, 404);
    assert.equal(adminMissing.headers['content-type'], 'application/problem+json');
    assert.equal(adminMissing.json().detail, routeMissing.json().detail);
    assert.match(adminMissing.json().detail, /a\/b/, 'the key reaches the mapping decoded once');

    const [routeBad, adminBad] = await both('POST', '/meters/api_calls/query', { granularity: 'PT5M' });
    assert.equal(adminBad.status, 400);
    assert.deepEqual(adminBad.json().invalid_parameters, routeBad.json().invalid_parameters);
  });

  test('the route requires its scopes; the admin listener, the operator\'s, does not', async () => {
    const scoped = await request(`${gw.https}${SCOPED_PATH}/meters`, { headers: { authorization: `Bearer ${api.token}` } });
    assert.equal(scoped.status, 403, scoped.text);
    assert.equal((await admin('/metering/meters')).status, 200);
    assert.equal((await admin('/metering/customers')).status, 200);
  });

  test('read only: writes are refused and change nothing', async () => {
    const before = (await admin('/metering/meters')).json();
    const customersBefore = (await admin('/metering/customers')).json();
    const json = { 'content-type': 'application/json' };
    const writes: [string, string, number][] = [
      ['POST', '/metering/meters', 405],
      ['PUT', '/metering/meters/api_calls', 405],
      ['DELETE', '/metering/meters/api_calls', 405],
      ['POST', '/metering/events', 405],
      ['POST', '/metering/customers', 405],
      ['DELETE', '/metering/customers/acme-corp', 405],
      ['POST', '/metering/subscriptions', 405],
      ['POST', `/metering/subscriptions/${subscriptionId}/cancel`, 404],
      ['POST', '/metering/plans/starter/archive', 404],
    ];
    for (const [method, path, status] of writes) {
      const body = JSON.stringify({ key: 'made_by_admin', name: 'x', event_type: 'x', aggregation: 'count', specversion: '1.0', id: 'x', source: 'x', type: 'x', subject: 'x' });
      assert.equal((await admin(path, { method, body, headers: json })).status, status, `${method} ${path}`);
    }
    assert.deepEqual((await admin('/metering/meters')).json(), before);
    assert.deepEqual((await admin('/metering/customers')).json(), customersBefore);
    assert.equal((await api.send('GET', `/subscriptions/${subscriptionId}`)).json().status, 'active');
  });

  test('/metering/status: the ingest queue with its limit, the dedupe filter, the meters, backfills', async () => {
    const meter = await api.createMeterOk({ key: `late_${randomUUID().slice(0, 8)}`, name: 'late', event_type: 'request', aggregation: 'count' });
    const status = (await admin('/metering/status')).json();
    assert.deepEqual(status.queue, { events: 0, max_events: QUEUE_MAX });
    // On PostgreSQL the journal's unique key deduplicates: there is no filter.
    if (TEST_DATABASE === 'postgres') assert.deepEqual(status.dedupe_filter, { hashes: 0, bytes: 0 });
    else assert.ok(status.dedupe_filter.hashes >= 4 && status.dedupe_filter.bytes > 0, JSON.stringify(status));
    // The aggregating process, as GET / names its node (and with workers, whichever process answers).
    assert.equal(status.aggregator.node_id, (await admin('/')).json().node_id);
    assert.ok(Number.isInteger(status.aggregator.pid) && status.aggregator.pid > 0, JSON.stringify(status.aggregator));
    assert.equal(status.meters, METERS.length + 1);
    // A meter created over stored events is backfilled; each backfill shows its share done, until it is complete.
    for (const backfill of status.backfills) {
      assert.equal(backfill.meter.key, meter.key);
      assert.ok(backfill.ratio >= 0 && backfill.ratio <= 1);
    }
    const deadline = Date.now() + 10_000;
    while ((await admin('/metering/status')).json().backfills.length > 0) assert.ok(Date.now() < deadline, 'the backfill never ended');
    const counted = await api.queryOk(meter.key);
    assert.equal(counted.data[0].value, '4');
  });

  test('/metering/status and /metrics count, per meter, the events whose value a meter could not use', async () => {
    const type = `units_${randomUUID().slice(0, 8)}`;
    const meter = await api.createMeterOk({ key: type, name: 'units', event_type: type, aggregation: 'sum', value_property: '$.units' });
    const event = (data: Record<string, unknown>) => ({ specversion: '1.0', id: randomUUID(), source: 'status-test', type, subject: 'acme', data });
    await api.ingestOk([event({ units: 5 }), event({}), event({ units: 'many' }), event({ units: 'many' })]);
    assert.equal((await api.queryOk(meter.key)).data[0].value, '5');
    const rejected = (await admin('/metering/status')).json().rejected_values.filter((r: any) => r.meter === meter.key);
    assert.deepEqual(rejected, [
      { meter: meter.key, reason: 'value_invalid', events: 2 },
      { meter: meter.key, reason: 'value_missing', events: 1 },
    ]);
    const metrics = (await admin('/metrics')).text;
    assert.match(metrics, new RegExp(`tollgate_metering_meter_rejected_values_total\\{meter="${meter.key}",reason="value_invalid"\\} 2`));
  });
});

test('without a metering route the admin paths answer 404 saying so', async () => {
  const gw = await startGateway({ routes: [{ name: 'plain', paths: ['/plain'] }] });
  try {
    for (const path of ['/metering/meters', '/metering/status', '/metering/customers']) {
      const reply = await request(gw.admin + path);
      assert.equal(reply.status, 404, path);
      assert.equal(reply.json().message, 'no route runs the metering plugin');
    }
  } finally {
    await gw.stop();
  }
});

/** An answer without what names the request (a problem's `instance`) or the moment of an access decision (`updated_at` of the batch query). */
function comparable(path: string, body: any): any {
  const { instance: _instance, ...rest } = body;
  if (path === '/entitlement-access/query') rest.data = rest.data.map(({ updated_at: _at, ...decision }: any) => decision);
  return rest;
}
