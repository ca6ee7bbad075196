/**
 * Request metering into the gateway's own metering store (no ingest_endpoint): Kong's event shape (type,
 * id = the request id, source tollgate/<node id>, time = request start, subject, data), usage per
 * consumer per route in a meter at once, subject resolution (consumer username by default, id,
 * custom_id, header, query, the credential for `application`), requests without a subject counted and
 * not metered, attributes from headers and query, the plugin scoped to a consumer, an event the store
 * refuses dropped alone (counted), and the metrics of
 * the writer and of the plugin.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';
import { ALICE, BOB, call, fixtureConfig, meteringApi, metric, nodeIdOf, tokenOf, type MeteringApi } from './support.ts';

const FAST = { queue: { max_coalescing_delay: 0.05 } };

let upstream: Upstream;
before(async () => {
  upstream = await startUpstream();
});
after(() => upstream.close());

async function eventsOf(api: MeteringApi, filters: Record<string, string>, count: number) {
  const items = await api.eventsWhen(filters, count);
  assert.equal(items.length, count, `expected ${count} events for ${JSON.stringify(filters)}, got ${items.length}`);
  return items.map((i) => i.event);
}

describe('events into the local metering store', () => {
  let gw: TestGateway;
  let api: MeteringApi;
  let alice: string;
  let bob: string;
  before(async () => {
    gw = await startGateway(fixtureConfig({
      upstream: upstream.url,
      plugin: { ...FAST, attributes: [
        { source: 'header', look_up_value_in: 'X-Department', event_property_name: 'department' },
        { source: 'query', look_up_value_in: 'project', event_property_name: 'project' },
      ] },
      meters: [{ key: 'requests_by_route', name: 'Requests', event_type: 'kong.api_request', aggregation: 'count', dimensions: { route: '$.route_name', status: '$.response_http_status' } }],
    }));
    api = await meteringApi(gw.https);
    [alice, bob] = await Promise.all([tokenOf(gw.https, ALICE), tokenOf(gw.https, BOB)]);
  });
  after(() => gw.stop());

  test('one kong.api_request per request, shaped as Kong emits it', async () => {
    const startedAt = Date.now();
    const res = await call(gw.http, alice, '/api/orders?project=apollo&x=1', { headers: { 'x-department': 'sales', 'user-agent': 'probe/1.0' }, method: 'POST', body: 'hello' });
    assert.equal(res.status, 200);
    const id = res.headers['x-kong-request-id'] as string;
    const [event] = await eventsOf(api, { id }, 1);
    assert.equal(event.type, 'kong.api_request');
    assert.equal(event.source, `tollgate/${await nodeIdOf(gw.admin)}`);
    assert.equal(event.subject, 'alice');
    const time = Date.parse(event.time);
    assert.ok(time >= Math.floor(startedAt / 1000) * 1000 && time <= Date.now(), `event time ${event.time} is the request's start`);
    const data = event.data;
    assert.equal(data.request_method, 'POST');
    assert.equal(data.request_uri, '/api/orders?project=apollo&x=1');
    assert.equal(data.request_host, '127.0.0.1');
    assert.equal(data.client_ip, '127.0.0.1');
    assert.equal(data.request_user_agent, 'probe/1.0');
    assert.equal(data.request_size_bytes, 5);
    assert.equal(data.response_size_bytes, res.body.length);
    assert.equal(data.response_http_status, 200);
    assert.equal(data.upstream_status, 200);
    assert.equal(data.route_name, 'api');
    assert.equal(data.service_name, 'api');
    assert.equal(data.service_protocol, 'http');
    assert.equal(data.service_port, upstream.port);
    assert.equal(data.subject_type, 'consumer_username');
    assert.equal(data.request_protocol, 'http');
    assert.equal(typeof data.latency_ms, 'number');
    assert.equal(data.department, 'sales');
    assert.equal(data.project, 'apollo');
  });

  test('an attribute the request does not carry is left out', async () => {
    const res = await call(gw.http, bob, '/api/plain');
    const [event] = await eventsOf(api, { id: res.headers['x-kong-request-id'] as string }, 1);
    assert.equal(event.subject, 'bob');
    assert.ok(!('department' in event.data) && !('project' in event.data), JSON.stringify(event.data));
  });

  test('usage per consumer per route shows in a meter at once', async () => {
    const before = await api.queryOk('requests_by_route', { group_by_dimensions: ['subject', 'route'] });
    const countOf = (result: typeof before, subject: string) => Number(result.data.find((r) => r.dimensions.subject === subject && r.dimensions.route === 'api')?.value ?? 0);
    await Promise.all([...Array(5)].map(() => call(gw.http, alice)));
    await Promise.all([...Array(3)].map(() => call(gw.http, bob)));
    const after = await api.queryWhen('requests_by_route', { group_by_dimensions: ['subject', 'route'] }, (r) => countOf(r, 'alice') - countOf(before, 'alice') >= 5 && countOf(r, 'bob') - countOf(before, 'bob') >= 3);
    assert.equal(countOf(after, 'alice') - countOf(before, 'alice'), 5);
    assert.equal(countOf(after, 'bob') - countOf(before, 'bob'), 3);
  });

  test('a request the gateway refuses is not metered, and counted on /metrics', async () => {
    const before = await metric(gw.admin, 'tollgate_request_metering_gateway_answers_total', { route: 'api' });
    // The oauth2 plugin refuses it; the log phase still runs for every plugin of the route, as Kong's does:
    // the upstream never answered, so no event, and one more request counted as the gateway's own answer.
    const refused = await call(gw.http, null);
    assert.equal(refused.status, 401);
    await waitFor(() => metric(gw.admin, 'tollgate_request_metering_gateway_answers_total', { route: 'api' }), 'the unmetered request counted', 10_000, (n) => n === before + 1);
    assert.deepEqual(await api.listAllEvents({ id: refused.headers['x-kong-request-id'] as string }), []);
  });

  test('the writer and the plugin report on /metrics', async () => {
    const ingested = await metric(gw.admin, 'tollgate_metering_events_ingested_total');
    assert.ok(ingested > 0, `ingested ${ingested}`);
    assert.ok((await metric(gw.admin, 'tollgate_metering_batch_events_count')) > 0);
    assert.ok((await metric(gw.admin, 'tollgate_request_metering_events_total', { type: 'kong.api_request' })) > 0);
    assert.ok((await metric(gw.admin, 'tollgate_request_metering_deliveries_total')) > 0);
  });
});

describe('subject resolution', () => {
  const cases: [
    string,
    Record<string, unknown>,
    (r: { token: string; custom: string }) => { path?: string; headers?: Record<string, string> },
    string | null,
    string,
  ][] = [
    ['consumer id', { look_up_value_in: 'consumer', field: 'id' }, () => ({}), 'id', 'consumer_id'],
    [
      'consumer custom_id',
      { look_up_value_in: 'consumer', field: 'custom_id' },
      () => ({}),
      'cust-alice',
      'consumer_custom_id',
    ],
    [
      'a header',
      { look_up_value_in: 'header', field: 'X-Tenant' },
      () => ({ headers: { 'x-tenant': 'tenant-7' } }),
      'tenant-7',
      'header',
    ],
    [
      'a query parameter',
      { look_up_value_in: 'query', field: 'tenant' },
      () => ({ path: '/api/x?tenant=tenant-9' }),
      'tenant-9',
      'query',
    ],
    ['the application (the credential)', { look_up_value_in: 'application' }, () => ({}), 'credential', 'application'],
  ];
  for (const [what, subject, shape, expected, type] of cases) {
    test(`from ${what}`, async () => {
      const gw = await startGateway(fixtureConfig({ upstream: upstream.url, plugin: { ...FAST, subject } }));
      try {
        const api = await meteringApi(gw.https);
        const token = await tokenOf(gw.https, ALICE);
        const { path, headers } = shape({ token, custom: ALICE.custom_id });
        const res = await call(gw.http, token, path, { headers });
        const [event] = await eventsOf(api, { id: res.headers['x-kong-request-id'] as string }, 1);
        const consumers = (await (await fetch(`${gw.admin}/consumers`)).json()).data;
        const want = expected === 'id' ? consumers.find((c: any) => c.username === 'alice').id
          : expected === 'credential' ? (await (await fetch(`${gw.admin}/oauth2?client_id=${ALICE.client_id}`)).json()).data[0].id
          : expected;
        assert.equal(event.subject, want);
        assert.equal(event.data.subject_type, type);
      } finally {
        await gw.stop();
      }
    });
  }

  test('no value: no event, counted by route on /metrics', async () => {
    const gw = await startGateway(fixtureConfig({ upstream: upstream.url, plugin: { ...FAST, subject: { look_up_value_in: 'header', field: 'x-tenant' } } }));
    try {
      const api = await meteringApi(gw.https);
      const token = await tokenOf(gw.https, ALICE);
      const missing = await Promise.all([...Array(3)].map(() => call(gw.http, token)));
      const present = await call(gw.http, token, undefined, { headers: { 'x-tenant': 't1' } });
      await eventsOf(api, { id: present.headers['x-kong-request-id'] as string }, 1);
      assert.equal(await metric(gw.admin, 'tollgate_request_metering_no_subject_total', { route: 'api' }), 3);
      for (const res of missing) assert.equal((await api.listAllEvents({ id: res.headers['x-kong-request-id'] as string })).length, 0);
    } finally {
      await gw.stop();
    }
  });
});

test('a consumer-scoped instance meters only that consumer', async () => {
  const config = fixtureConfig({ upstream: upstream.url, plugin: null });
  config.consumers[0].plugins = [{ name: 'metering-and-billing', config: FAST }];
  const gw = await startGateway(config);
  try {
    const api = await meteringApi(gw.https);
    const [alice, bob] = await Promise.all([tokenOf(gw.https, ALICE), tokenOf(gw.https, BOB)]);
    const a = await call(gw.http, alice);
    const b = await call(gw.http, bob);
    await eventsOf(api, { id: a.headers['x-kong-request-id'] as string }, 1);
    await waitFor(() => metric(gw.admin, 'tollgate_request_metering_deliveries_total'), 'the writer to settle', 10_000, (n) => n >= 1);
    assert.equal((await api.listAllEvents({ id: b.headers['x-kong-request-id'] as string })).length, 0);
  } finally {
    await gw.stop();
  }
});

test('a value past a dimension limit (a 2,000-character header) stands in bounded: the request is metered all the same', async () => {
  const gw = await startGateway(fixtureConfig({
    upstream: upstream.url,
    plugin: { queue: { max_coalescing_delay: 0.3 }, attributes: [{ source: 'header', look_up_value_in: 'x-team', event_property_name: 'team' }] },
    meters: [{ key: 'by_team', name: 'By team', event_type: 'kong.api_request', aggregation: 'count', dimensions: { team: '$.team' } }],
  }));
  try {
    const api = await meteringApi(gw.https);
    const token = await tokenOf(gw.https, ALICE);
    const [long, short] = await Promise.all([call(gw.http, token, undefined, { headers: { 'x-team': 'x'.repeat(2000) } }), call(gw.http, token, undefined, { headers: { 'x-team': 'core' } })]);
    await eventsOf(api, { id: short.headers['x-kong-request-id'] as string }, 1);
    const [event] = await eventsOf(api, { id: long.headers['x-kong-request-id'] as string }, 1);
    // Its start, then `…#` and a hash of the whole value: 1024 characters, the same for the same value.
    const team = (event.data as Record<string, string>).team;
    assert.equal(team.length, 1024);
    assert.match(team, /^x+…#[\w-]{43}$/);
    const byTeam = await api.queryOk('by_team', { group_by_dimensions: ['team'] });
    assert.deepEqual(byTeam.data.map((row) => row.dimensions!.team).sort(), ['core', team]);
    assert.equal(await metric(gw.admin, 'tollgate_request_metering_dropped_events_total'), 0);
  } finally {
    await gw.stop();
  }
});
