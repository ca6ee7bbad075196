/**
 * The admin API: node info, status, readiness, entity lists in Kong's shape with paging, read-only
 * declarative entities (405), runtime consumers persisted across restarts, Prometheus metrics.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { bundledPlugins } from '../../src/plugins.ts';
import { request, startGateway, startUpstream, type RequestOptions, type TestGateway, type Upstream } from '../helpers/gateway.ts';
import { portOf, rawRequest } from '../helpers/support.ts';

let gw: TestGateway;
let echo: Upstream;

function config(): Record<string, any> {
  return {
    services: [
      {
        name: 'orders',
        url: `${echo.url}/o`,
        routes: [
          { name: 'orders-list', paths: ['/orders'], plugins: [{ name: 'oauth2', config: { enable_client_credentials: true, provision_key: 'pk' } }] },
          { name: 'orders-open', paths: ['/open'] },
        ],
      },
      { name: 'users', url: echo.url, routes: [{ name: 'users', paths: ['/users'] }] },
      { name: 'billing', url: echo.url },
    ],
    consumers: [{ username: 'declared', custom_id: 'c-1' }],
  };
}

before(async () => {
  echo = await startUpstream();
  gw = await startGateway(config());
});

after(async () => {
  await gw?.stop();
  await echo?.close();
});

const admin = (path: string, options?: Parameters<typeof request>[1]) => request(gw.admin + path, options);

test('GET / describes the node: version, a node id stable across restarts, plugins available and in use, its database', async () => {
  const reply = await admin('/');
  assert.equal(reply.status, 200);
  const info = reply.json();
  assert.equal(info.version, '3.10.0', 'the Kong release whose admin API Tollgate follows');
  assert.equal(info.tollgate_version, '0.1.0');
  assert.match(info.node_id, /^[0-9a-f-]{36}$/);
  assert.deepEqual(Object.keys(info.plugins.available_on_server).sort(), [...bundledPlugins.keys()].sort());
  assert.equal(info.plugins.available_on_server.oauth2.priority, 1400);
  assert.deepEqual(info.plugins.enabled_in_cluster, ['oauth2']);
  assert.equal(info.configuration.database, 'leveldb');
  assert.equal(info.configuration.db_update_frequency, 1);
  assert.equal(info.configuration.declarative_config, gw.configFile);
  assert.equal(typeof info.hostname, 'string');
});

test('GET /status counts connections and requests and carries the configuration hash', async () => {
  const before = (await admin('/status')).json();
  await request(`${gw.http}/open/x`);
  await request(`${gw.http}/nothing`);
  const after = (await admin('/status')).json();
  assert.ok(after.server.total_requests >= before.server.total_requests + 2);
  assert.ok(after.server.connections_accepted >= before.server.connections_accepted + 2);
  assert.ok(after.server.connections_active >= 1, 'at least this admin connection');
  assert.equal(after.configuration_hash, createHash('md5').update(readFileSync(gw.configFile)).digest('hex'));
});

test('GET /status/ready', async () => {
  const reply = await admin('/status/ready');
  assert.equal(reply.status, 200);
  assert.deepEqual(reply.json(), { message: 'ready' });
});

test("entity lists in Kong's shape, single entities by name or id, nested routes", async () => {
  const services = (await admin('/services')).json();
  assert.equal(services.next, null);
  assert.deepEqual(
    services.data.map((s: any) => s.name),
    ['orders', 'users', 'billing'],
  );
  const orders = services.data[0];
  assert.deepEqual(
    { protocol: orders.protocol, host: orders.host, port: orders.port, path: orders.path, retries: orders.retries },
    { protocol: 'http', host: '127.0.0.1', port: echo.port, path: '/o', retries: 5 },
  );
  assert.deepEqual((await admin('/services/orders')).json(), orders);
  assert.deepEqual((await admin(`/services/${orders.id}`)).json(), orders);

  const nested = (await admin('/services/orders/routes')).json();
  assert.deepEqual(nested.data.map((r: any) => r.name), ['orders-list', 'orders-open']);
  assert.deepEqual(nested.data[0].service, { id: orders.id });

  const routes = (await admin('/routes')).json();
  assert.equal(routes.data.length, 3);
  assert.deepEqual((await admin('/routes/users')).json().paths, ['/users']);
  assert.deepEqual((await admin('/routes/orders-open/service')).json(), orders, "a route's service");

  const plugins = (await admin('/plugins')).json();
  assert.equal(plugins.data.length, 1);
  assert.equal(plugins.data[0].name, 'oauth2');
  assert.deepEqual(plugins.data[0].route, { id: nested.data[0].id });
  assert.equal(plugins.data[0].config.enable_client_credentials, true);
  assert.equal((await admin(`/plugins/${plugins.data[0].id}`)).status, 200);

  const consumers = (await admin('/consumers')).json();
  assert.ok(consumers.data.some((c: any) => c.username === 'declared' && c.custom_id === 'c-1'));

  const missing = await admin('/services/nope');
  assert.equal(missing.status, 404);
  assert.equal(missing.json().message, 'Not found');
  assert.equal((await admin('/no-such-endpoint')).status, 404);
});

test('paging: size and offset walk the whole list', async () => {
  const seen: string[] = [];
  let next: string | null = '/services?size=2';
  let pages = 0;
  while (next) {
    const page: any = (await admin(next)).json();
    assert.ok(page.data.length <= 2);
    seen.push(...page.data.map((s: any) => s.name));
    next = page.next;
    pages++;
  }
  assert.equal(pages, 2);
  assert.deepEqual(seen, ['orders', 'users', 'billing']);
  for (const [size, message] of [['abc', 'size must be a number'], ['0', 'size must be an integer between 1 and 1000'], ['1001', 'size must be an integer between 1 and 1000'], ['1.5', 'size must be an integer between 1 and 1000']]) {
    const bad = await admin(`/services?size=${size}`);
    assert.equal(bad.status, 400, size);
    assert.deepEqual(bad.json(), { code: 9, name: 'invalid size', message });
  }
  for (const offset of ['LTU', 'bm90LWEtbnVtYmVy', '!!!']) {
    const bad = await admin(`/services?offset=${offset}`);
    assert.equal(bad.status, 400, offset);
    assert.equal(bad.json().name, 'invalid offset');
    assert.match(bad.json().message, new RegExp(`^'${offset}' is not a valid offset: `));
  }
});

test('entities from gateway.yaml are read-only: 405', async () => {
  const attempts: [string, string][] = [
    ['POST', '/services'],
    ['PATCH', '/services/orders'],
    ['PUT', '/services/orders'],
    ['DELETE', '/services/orders'],
    ['POST', '/routes'],
    ['DELETE', '/routes/users'],
    ['POST', '/plugins'],
    ['PATCH', '/plugins/x'],
    ['PATCH', '/consumers/declared'],
    ['DELETE', '/consumers/declared'],
    ['DELETE', '/status'],
  ];
  for (const [method, path] of attempts) {
    const reply = await admin(path, method === 'DELETE' ? { method } : { method, body: { name: 'x' } });
    assert.equal(reply.status, 405, `${method} ${path}`);
    assert.match(reply.json().message, /./);
  }
  // Kong's DB-less errors, word for word.
  const kong: [string, string, string][] = [
    ['POST', '/services', "cannot create 'services' entities when not using a database"],
    ['PUT', '/routes/users', "cannot create or update 'routes' entities when not using a database"],
    ['PATCH', '/plugins/x', "cannot update 'plugins' entities when not using a database"],
    ['DELETE', '/services/orders', "cannot remove 'services' entities when not using a database"],
  ];
  for (const [method, path, message] of kong) {
    const reply = await admin(path, method === 'DELETE' ? { method } : { method, body: { name: 'x' } });
    assert.deepEqual(reply.json(), { code: 12, name: 'operation unsupported', message }, `${method} ${path}`);
  }
  assert.equal((await admin('/services')).json().data.length, 3, 'nothing changed');
  assert.ok((await admin('/consumers/declared')).status === 200);
});

test('POST /consumers: validation, uniqueness, and persistence across a restart', async () => {
  const created = await admin('/consumers', { method: 'POST', body: { username: 'runtime-user', custom_id: 'r-1', tags: ['t'] } });
  assert.equal(created.status, 201, created.text);
  const consumer = created.json();
  assert.match(consumer.id, /^[0-9a-f-]{36}$/);
  assert.equal(consumer.username, 'runtime-user');

  // Kong's lookups by a unique field, as a list of one.
  assert.deepEqual((await admin('/consumers?custom_id=r-1')).json().data, [consumer]);
  assert.deepEqual((await admin('/consumers?username=nobody')).json().data, []);
  // A runtime consumer can be changed (Kong's PATCH), a declared one cannot (below).
  const patched = await admin(`/consumers/${consumer.id}`, { method: 'PATCH', body: { tags: ['t', 'u'] } });
  assert.deepEqual(patched.json().tags, ['t', 'u']);
  await admin(`/consumers/${consumer.id}`, { method: 'PATCH', body: { tags: ['t'] } });

  const form = await admin('/consumers', { method: 'POST', body: 'username=form-user', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  assert.equal(form.status, 201, form.text);

  assert.equal((await admin('/consumers', { method: 'POST', body: { username: 'runtime-user' } })).status, 409);
  assert.equal((await admin('/consumers', { method: 'POST', body: { username: 'declared' } })).status, 409, 'clashes with a declared consumer too');
  const empty = await admin('/consumers', { method: 'POST', body: {} });
  assert.equal(empty.status, 400);
  assert.match(empty.json().message, /at least one of these fields must be non-empty/);
  const broken = await admin('/consumers', { method: 'POST', body: '{not json', headers: { 'content-type': 'application/json' } });
  assert.equal(broken.status, 400);

  // A runtime consumer can be deleted; the declared ones cannot (above).
  assert.equal((await admin('/consumers/form-user', { method: 'DELETE' })).status, 204);
  assert.equal((await admin('/consumers/form-user')).status, 404);

  const { dataDir } = gw;
  await gw.stop();
  gw = await startGateway(config(), { dataDir });
  const after = await admin('/consumers/runtime-user');
  assert.equal(after.status, 200);
  assert.deepEqual(after.json(), consumer, 'the same consumer, id included, after a restart');
  assert.equal((await admin(`/consumers/${consumer.id}`)).status, 200);
  assert.equal((await admin('/consumers/form-user')).status, 404, 'a deleted consumer stays deleted');
  const names = (await admin('/consumers')).json().data.map((c: any) => c.username);
  assert.deepEqual(names.sort(), ['declared', 'runtime-user']);
});

test('a username both declared (after a reload) and created at runtime resolves to the declared consumer', async () => {
  const created = await admin('/consumers', { method: 'POST', body: { username: 'twin', custom_id: 'runtime-twin' } });
  assert.equal(created.status, 201);
  assert.equal(await gw.reload({ ...config(), consumers: [...config().consumers, { username: 'twin', custom_id: 'declared-twin' }] }), true);
  assert.equal((await admin('/consumers/twin')).json().custom_id, 'declared-twin');
  assert.equal((await admin(`/consumers/${created.json().id}`)).json().custom_id, 'runtime-twin', 'the runtime one is still there by id');
  assert.equal(await gw.reload(config()), true);
  assert.equal((await admin('/consumers/twin')).json().custom_id, 'runtime-twin');
});

test('GET /metrics: Prometheus text with requests by route/service/status, latency histograms and connections', async () => {
  await request(`${gw.http}/open/m1`);
  await request(`${gw.http}/open/m2`);
  await request(`${gw.http}/users/m3`);
  await request(`${gw.http}/not-routed`);
  const reply = await admin('/metrics');
  assert.equal(reply.status, 200);
  assert.match(String(reply.headers['content-type']), /^text\/plain; version=0\.0\.4/);
  const text = reply.text;
  const counter = (labels: string) => {
    const m = new RegExp(`^tollgate_http_requests_total\\{${labels}\\} (\\d+)$`, 'm').exec(text);
    return m ? Number(m[1]) : 0;
  };
  assert.ok(counter('route="orders-open",service="orders",code="200"') >= 2, text);
  assert.ok(counter('route="users",service="users",code="200"') >= 1);
  assert.ok(counter('route="",service="",code="404"') >= 1, 'unrouted requests are counted too');
  assert.match(text, /^tollgate_request_latency_ms_bucket\{route="orders-open",service="orders",le="\+Inf"\} 2$/m);
  assert.match(text, /^tollgate_upstream_latency_ms_count\{route="users",service="users"\} \d+$/m);
  assert.match(text, /^tollgate_connections_active \d+$/m);
  assert.match(text, /^tollgate_connections_accepted_total \d+$/m);
  assert.match(text, /^# TYPE tollgate_request_latency_ms histogram$/m);
});

test('CSRF: a cross-origin request (any method, any body) is refused and changes nothing', async () => {
  const before = (await admin('/consumers')).json().data.length;
  const attempts: RequestOptions[] = [
    // What a page can send without a CORS preflight: text/plain and form bodies.
    { method: 'POST', headers: { origin: 'http://evil.example', 'content-type': 'text/plain' }, body: JSON.stringify({ username: 'csrf-1' }) },
    { method: 'POST', headers: { origin: 'http://evil.example', 'content-type': 'application/x-www-form-urlencoded' }, body: 'username=csrf-2' },
    { method: 'POST', headers: { origin: 'null', 'content-type': 'application/json' }, body: { username: 'csrf-3' } },
    // Another port of the same host is another origin.
    { method: 'POST', headers: { origin: 'http://127.0.0.1:1', 'content-type': 'application/json' }, body: { username: 'csrf-4' } },
    { method: 'POST', headers: { 'sec-fetch-site': 'cross-site', 'content-type': 'application/json' }, body: { username: 'csrf-5' } },
  ];
  for (const attempt of attempts) {
    const reply = await admin('/consumers', attempt);
    assert.equal(reply.status, 403, JSON.stringify(attempt.headers));
    assert.match(reply.json().message, /cross-origin/);
  }
  assert.equal((await admin('/consumers', { headers: { origin: 'http://evil.example' } })).status, 403, 'reads too');
  assert.equal((await admin('/consumers')).json().data.length, before);
  // The admin's own origin, and tools that send none, are served.
  const own = await admin('/consumers', { method: 'POST', headers: { origin: gw.admin }, body: { username: 'same-origin' } });
  assert.equal(own.status, 201, own.text);
  assert.equal((await admin('/consumers/same-origin', { method: 'DELETE', headers: { 'sec-fetch-site': 'same-origin' } })).status, 204);
});

test('bodies are JSON, or forms: anything else (text/plain, none declared, multipart) is a 415, never parsed as JSON', async () => {
  for (const type of ['text/plain', undefined, 'multipart/form-data; boundary=x', 'application/xml']) {
    const headers = type === undefined ? {} : { 'content-type': type };
    const reply = await admin('/consumers', { method: 'POST', headers, body: JSON.stringify({ username: `typed-${type}` }) });
    assert.equal(reply.status, 415, String(type));
    assert.match(reply.json().message, /application\/json/);
  }
  assert.equal((await admin('/consumers/typed-text%2Fplain')).status, 404);
  const json = await admin('/consumers', { method: 'POST', headers: { 'content-type': 'application/json; charset=utf-8' }, body: JSON.stringify({ username: 'typed-json' }) });
  assert.equal(json.status, 201);
  assert.equal((await admin('/consumers/typed-json', { method: 'DELETE' })).status, 204);
});

test('DNS rebinding: a loopback admin listener answers only to a loopback Host', async () => {
  const port = portOf(gw.admin);
  for (const host of ['evil.example', `evil.example:${port}`, '10.0.0.1', 'localhost.evil.example']) {
    const reply = await rawRequest(port, ['GET /consumers HTTP/1.1', `Host: ${host}`]);
    assert.equal(reply.status, 403, host);
    assert.match(reply.body, /loopback/, host);
  }
  for (const host of [`127.0.0.1:${port}`, 'localhost', `LOCALHOST.:${port}`, '127.1.2.3', '[::1]', 'admin.localhost']) {
    assert.equal((await rawRequest(port, ['GET /consumers HTTP/1.1', `Host: ${host}`])).status, 200, host);
  }
});

test('an admin listener beyond loopback does not restrict Host (its names are the operator’s), but still refuses cross-origin requests', async () => {
  const wide = await startGateway({ gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['0.0.0.0:0'] } });
  try {
    const port = portOf(wide.admin);
    assert.equal((await rawRequest(port, ['GET /status HTTP/1.1', 'Host: gateway.internal'])).status, 200);
    assert.equal((await rawRequest(port, ['GET /status HTTP/1.1', 'Host: gateway.internal', 'Origin: http://evil.example'])).status, 403);
  } finally {
    await wide.stop();
  }
});

test('a request target the URL parser refuses gets a 400, not silence', async () => {
  const reply = await rawRequest(portOf(gw.admin), ['GET http://[/ HTTP/1.1', 'Host: 127.0.0.1']);
  assert.equal(reply.status, 400);
});
