/**
 * Explicit nulls in gateway.yaml, as Kong's exports and decK files write them for unset fields, through a
 * real load: a field with a default takes it (Kong stores the null but hands its code a stored null as
 * absent, kong/db/schema/init.lua process_auto_fields), a field without one stays null, and a null list
 * entry or map value is refused, as Kong's validator requires them (validate_elements). Kong's admin API
 * shows such a null as null (spec/02-integration/02-cmd/11-config_spec.lua, correlation-id's
 * `header_name: null`); Tollgate shows the default it runs with.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { request, startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { METHODS } from '../../../plugins/cors/schema.ts';

let upstream: Upstream;
let gw: TestGateway;

before(async () => {
  upstream = await startUpstream();
  gw = await startGateway({
    services: [
      {
        name: 'orders',
        url: upstream.url,
        retries: null,
        connect_timeout: null,
        tags: null,
        routes: [
          {
            name: 'orders',
            paths: ['/orders'],
            regex_priority: null,
            https_redirect_status_code: null,
            plugins: [{ name: 'cors', config: { origins: ['*'], methods: null, max_age: null, headers: null } }],
          },
        ],
      },
    ],
    upstreams: [{ name: 'pool', healthchecks: null, slots: null }],
    // As in Kong's db_import spec.
    plugins: [{ name: 'correlation-id', id: '467f719f-a544-4a8f-bc4b-7cd12913a9d4', config: { header_name: null, generator: 'uuid', echo_downstream: false } }],
  });
});

after(async () => {
  await gw?.stop();
  await upstream?.close();
});

const admin = async (path: string) => (await request(gw.admin + path)).json();

test('a null in a field with a default reads as the default; one without a default stays null', async () => {
  const service = await admin('/services/orders');
  assert.equal(service.retries, 5);
  assert.equal(service.connect_timeout, 60000);
  assert.equal(service.tags, null);
  const route = await admin('/routes/orders');
  assert.equal(route.regex_priority, 0);
  assert.equal(route.https_redirect_status_code, 426);
  const cors = (await admin('/plugins')).data.find((p: { name: string }) => p.name === 'cors');
  assert.deepEqual(cors.config.methods, [...METHODS]);
  assert.equal(cors.config.max_age, null);
  assert.equal(cors.config.headers, null);
  const pool = await admin('/upstreams/pool');
  assert.equal(pool.slots, 10000);
  assert.equal(pool.healthchecks.active.type, 'http');
  assert.equal(pool.healthchecks.passive.unhealthy.http_failures, 0);
  const correlation = await admin('/plugins/467f719f-a544-4a8f-bc4b-7cd12913a9d4');
  assert.deepEqual(correlation.config, { header_name: 'Kong-Request-ID', generator: 'uuid', echo_downstream: false });
});

test('the proxy and the plugin run with those defaults', async () => {
  const preflight = await request(`${gw.http}/orders`, {
    method: 'OPTIONS',
    headers: { origin: 'https://shop.example', 'access-control-request-method': 'PATCH' },
  });
  assert.equal(preflight.headers['access-control-allow-methods'], METHODS.join(','));
  const proxied = await request(`${gw.http}/orders`);
  assert.equal(proxied.status, 200);
  assert.match(String(proxied.json().headers['kong-request-id']), /^[0-9a-f]{8}-[0-9a-f]{4}-/);
});

test('a null list entry or map value is refused at its position', async () => {
  await assert.rejects(
    startGateway({
      services: [{ name: 's', url: upstream.url, routes: [{ name: 'r', paths: ['/a', null], headers: { 'x-tenant': null } }] }],
    }),
    (err: Error & { errors?: unknown[] }) => {
      const lines = (err.errors ?? []).map(String);
      assert.ok(lines.some((line) => line.includes('services[0].routes[0].paths[1]: required field missing')), lines.join('\n'));
      assert.ok(lines.some((line) => line.includes('services[0].routes[0].headers.x-tenant: required field missing')), lines.join('\n'));
      return true;
    },
  );
});
