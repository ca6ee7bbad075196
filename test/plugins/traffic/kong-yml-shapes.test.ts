/**
 * A kong.yml in the shape public ones take (top-level plugins naming their service or route, nested ones,
 * tags, Kong's deprecated-but-common fields left out), combining the traffic plugins on one API: the
 * file loads unchanged, and the traffic behaves as each plugin promises together: correlation-id first,
 * cors answering preflights before authentication and decorating the 401s, oauth2 identifying the
 * consumer, rate-limiting per consumer with a stricter consumer-scoped instance, the transformers, a
 * request-termination on a retired route, ip-restriction on the admin-ish route, and prometheus counting.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { parse } from 'yaml';
import { request, startGateway, startUpstream, tempDir, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { loadConfigFile } from '../../../src/config/load.ts';
import { bundledPlugins } from '../../../src/plugins.ts';

const KONG_YML = `
_format_version: "3.0"
_transform: true
services:
- name: orders-api
  url: http://127.0.0.1:UPSTREAM_PORT
  tags: [team-orders]
  routes:
  - name: orders
    paths: [/api/orders]
    strip_path: true
    tags: [team-orders]
  - name: orders-v1
    paths: [/api/v1/orders]
    plugins:
    - name: request-termination
      config: { status_code: 410, message: "Gone: use /api/orders" }
  - name: internal
    paths: [/api/internal]
    plugins:
    - name: ip-restriction
      config: { allow: [10.0.0.0/8] }
  plugins:
  - name: oauth2
    config: { enable_client_credentials: true, global_credentials: true, scopes: [orders] }
  - name: rate-limiting
    config: { minute: 5, hour: 1000, policy: local, limit_by: consumer }
  - name: request-transformer
    config:
      add: { headers: ["x-gateway:tollgate", "x-consumer-tier:$(headers['x-tier'] or 'standard')"] }
      remove: { headers: [x-internal-secret] }
  - name: response-transformer
    config:
      remove: { headers: [x-powered-by] }
      add: { json: ["served_by:gateway"] }
routes:
- name: tokens
  paths: [/auth]
  protocols: [https]
  plugins:
  - name: oauth2
    config: { enable_client_credentials: true, global_credentials: true, scopes: [orders] }
consumers:
- username: acme
  custom_id: cust-1
  tags: [gold]
  oauth2_credentials:
  - { name: Acme, client_id: acme-app, client_secret: acme-secret-123456, redirect_uris: [https://acme.example/cb] }
- username: trial
  oauth2_credentials:
  - { name: Trial, client_id: trial-app, client_secret: trial-secret-123456, redirect_uris: [https://trial.example/cb] }
plugins:
- name: correlation-id
  config: { header_name: X-Request-ID, generator: uuid, echo_downstream: true }
- name: cors
  service: orders-api
  config: { origins: ["https://shop.example.com"], credentials: true, max_age: 3600 }
- name: rate-limiting
  service: orders-api
  consumer: trial
  config: { minute: 2, policy: local, limit_by: consumer }
- name: prometheus
  config: { per_consumer: true, status_code_metrics: true }
`;

let upstream: Upstream;
let gw: TestGateway;
const tokens: Record<string, string> = {};

before(async () => {
  upstream = await startUpstream((req, res) => {
    res.setHeader('x-powered-by', 'upstream-framework');
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ path: req.url, headers: req.headers }));
  });
  const config = parse(KONG_YML.replace('UPSTREAM_PORT', String(upstream.port)));
  gw = await startGateway(config);
  for (const [who, id, secret] of [['acme', 'acme-app', 'acme-secret-123456'], ['trial', 'trial-app', 'trial-secret-123456']]) {
    const res = await request(`${gw.https}/auth/oauth2/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `grant_type=client_credentials&client_id=${id}&client_secret=${secret}&scope=orders`,
    });
    assert.equal(res.status, 200, res.text);
    tokens[who] = res.json().access_token;
  }
});

after(async () => {
  await gw?.stop();
  await upstream?.close();
});

const api = (path: string, options: { method?: string; headers?: Record<string, string> } = {}) => request(`${gw.https}${path}`, options);
const bearer = (who: string) => ({ authorization: `Bearer ${tokens[who]}` });

test('the file loads unchanged through the loader (the same text `npm run check` reads)', async () => {
  const file = join(tempDir(), 'kong.yml');
  writeFileSync(file, KONG_YML.replace('UPSTREAM_PORT', String(upstream.port)));
  const loaded = await loadConfigFile(file, bundledPlugins);
  assert.ok(loaded.ok, loaded.ok ? '' : loaded.errors.join('\n'));
});

test('a preflight is answered by cors before authentication, with the correlation id', async () => {
  const res = await api('/api/orders', { method: 'OPTIONS', headers: { origin: 'https://shop.example.com', 'access-control-request-method': 'POST' } });
  assert.equal(res.status, 200);
  assert.equal(res.headers['access-control-allow-origin'], 'https://shop.example.com');
  assert.equal(res.headers['access-control-max-age'], '3600');
  assert.match(String(res.headers['x-request-id']), /^[0-9a-f-]{36}$/);
});

test("oauth2's 401 carries the CORS headers and the correlation id, and no rate-limit headers (the limiter never ran)", async () => {
  const res = await api('/api/orders', { headers: { origin: 'https://shop.example.com' } });
  assert.equal(res.status, 401);
  assert.equal(res.headers['access-control-allow-origin'], 'https://shop.example.com');
  assert.ok(res.headers['x-request-id']);
  assert.equal(res.headers['x-ratelimit-limit-minute'], undefined);
});

test('an authenticated request: identity, transformed request and response, rate-limit headers per consumer', async () => {
  const res = await api('/api/orders/42', { headers: { ...bearer('acme'), 'x-internal-secret': 's3cr3t', 'x-tier': 'gold', 'x-request-id': 'client-id-1' } });
  assert.equal(res.status, 200);
  const body = res.json();
  assert.equal(body.path, '/42');
  assert.equal(body.headers['x-consumer-username'], 'acme');
  assert.equal(body.headers['x-gateway'], 'tollgate');
  assert.equal(body.headers['x-consumer-tier'], 'gold');
  assert.equal(body.headers['x-internal-secret'], undefined);
  assert.equal(body.headers['x-request-id'], 'client-id-1', 'the client\'s id is kept');
  assert.equal(body.served_by, 'gateway');
  assert.equal(res.headers['x-powered-by'], undefined);
  assert.equal(res.headers['x-request-id'], 'client-id-1');
  assert.equal(res.headers['x-ratelimit-limit-minute'], '5');
  assert.equal(res.headers['x-ratelimit-limit-hour'], '1000');
});

test('the consumer-scoped rate limit applies to its consumer only (Kong precedence: service+consumer)', async () => {
  const minute = Math.floor(Date.now() / 60_000);
  const statuses: number[] = [];
  for (let i = 0; i < 3; i++) statuses.push((await api('/api/orders', { headers: bearer('trial') })).status);
  if (Math.floor(Date.now() / 60_000) !== minute) return; // a new minute began meanwhile: the counts restarted
  assert.deepEqual(statuses, [200, 200, 429]);
  const refused = await api('/api/orders', { headers: bearer('trial') });
  assert.equal(refused.json().message, 'API rate limit exceeded');
  assert.equal(refused.headers['x-ratelimit-limit-minute'], '2');
  assert.ok(Number(refused.headers['retry-after']) >= 1);
  assert.equal((await api('/api/orders', { headers: bearer('acme') })).status, 200, 'acme has its own counter and limit');
});

test('a retired route is terminated; an internal one refuses outside addresses', async () => {
  const gone = await api('/api/v1/orders', { headers: bearer('acme') });
  assert.equal(gone.status, 410);
  assert.deepEqual(gone.json(), { message: 'Gone: use /api/orders', served_by: 'gateway' }, "the service's response-transformer rewrites the gateway's own answer too");
  const internal = await api('/api/internal', { headers: bearer('acme') });
  assert.equal(internal.status, 403);
  assert.equal(internal.json().message, 'IP address not allowed: 127.0.0.1');
});

test('prometheus counts it all, by consumer', async () => {
  const metrics = (await request(`${gw.admin}/metrics`)).text;
  assert.match(metrics, /kong_http_requests_total\{service="orders-api",route="orders",code="200",source="service",workspace="default",consumer="acme"\} \d+/);
  assert.match(metrics, /kong_http_requests_total\{service="orders-api",route="orders",code="401",source="kong",workspace="default",consumer=""\} 1/);
  assert.match(metrics, /kong_http_requests_total\{service="orders-api",route="orders-v1",code="410",source="kong",workspace="default",consumer="acme"\} 1/);
});
