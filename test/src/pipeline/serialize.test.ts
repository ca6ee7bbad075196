/**
 * Kong's log serializer (kong/pdk/log.lua `serialize`, spec/01-unit/10-log_serializer_spec.lua) through a
 * real gateway: a test plugin keeps what `ctx.serialize()` returned in its log phase, and the tests check
 * it field by field: request (uri, url, querystring, method, headers with authorization redacted, size,
 * tls), upstream_uri, upstream_status, response (status, headers, size), latencies, tries (with failed
 * ones), route, service, consumer, authenticated_entity, client_ip, started_at, source, and the values set
 * with setLogValue (dotted names, removal, the gateway's entities left untouched).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { authenticate, type PluginDefinition, type SerializedRequest } from '../../../src/pdk/index.ts';
import { request, startUpstream, type Upstream } from '../../helpers/gateway.ts';
import { closedPort, portOf, rawRequest, startWithRegistry, waitFor, type RegistryGateway } from '../../helpers/support.ts';

const serialized: SerializedRequest[] = [];

/** Authenticates `x-user: alice` as consumer alice, refuses `x-refuse`, sets log values from `x-log-*` headers. */
const capture: PluginDefinition<Record<string, never>> = {
  name: 'capture',
  version: '1.0.0',
  priority: 1000,
  configSchema: { type: 'record', fields: {} },
  create: (api) => ({
    access(ctx) {
      if (ctx.headers['x-user'] === 'alice') authenticate(ctx, api.consumers.byUsername('alice')!, { id: 'cred-1', identifier: 'alice-key' });
      if (ctx.headers['x-log-set']) ctx.setLogValue(String(ctx.headers['x-log-set']), 'set');
      if (ctx.headers['x-log-remove']) ctx.setLogValue(String(ctx.headers['x-log-remove']), undefined);
      if (ctx.headers['x-refuse']) ctx.respond(403, { message: 'no' }, { 'x-why': 'refused' });
    },
    log(ctx) {
      serialized.push(ctx.serialize());
    },
  }),
};

let upstream: Upstream;
let gw: RegistryGateway;
let refusedPort: number;

before(async () => {
  upstream = await startUpstream((req, res) => {
    res.setHeader('set-cookie', ['a=1', 'b=2']);
    res.writeHead(req.url?.endsWith('/teapot') ? 418 : 200, { 'content-type': 'text/plain', 'x-upstream': 'yes' }).end('hello');
  });
  refusedPort = await closedPort();
  gw = await startWithRegistry(
    {
      services: [
        { name: 'echo', url: `${upstream.url}/base`, routes: [{ name: 'svc', paths: ['/svc'] }] },
        { name: 'down', url: `http://127.0.0.1:${refusedPort}`, retries: 2, routes: [{ name: 'down', paths: ['/down'] }] },
      ],
      consumers: [{ username: 'alice', id: '9b2a48a0-3a52-4b6e-a7b2-6a0e1b2f4c11' }],
      plugins: [{ name: 'capture', config: {} }],
    },
    new Map([['capture', capture as PluginDefinition]]),
  );
});

after(async () => {
  await gw?.stop();
  await upstream?.close();
});

async function logOf(url: string, headers: Record<string, string> = {}): Promise<SerializedRequest> {
  const before = serialized.length;
  await request(url, { headers });
  return waitFor(() => serialized[before], 'the log phase');
}

test('a proxied request: request, upstream, response, latencies and the route and service', async () => {
  const startedBefore = Date.now();
  const port = portOf(gw.http);
  const res = await logOf(`${gw.http}/svc/items?b=2&flag&b=3&e=&sp=a+b%21`, { authorization: 'Basic c2VjcmV0', 'proxy-authorization': 'x', 'x-custom': 'one' });
  assert.equal(res.request.id.length, 36);
  assert.equal(res.request.uri, '/svc/items?b=2&flag&b=3&e=&sp=a+b%21');
  assert.equal(res.request.url, `http://127.0.0.1:${port}/svc/items?b=2&flag&b=3&e=&sp=a+b%21`);
  assert.deepEqual(res.request.querystring, { b: ['2', '3'], flag: true, e: '', sp: 'a b!' });
  assert.equal(res.request.method, 'GET');
  // Kong redacts the two authentication headers whatever the configuration.
  assert.equal(res.request.headers.authorization, 'REDACTED');
  assert.equal(res.request.headers['proxy-authorization'], 'REDACTED');
  assert.equal(res.request.headers['x-custom'], 'one');
  assert.equal(res.request.headers.host, `127.0.0.1:${port}`);
  assert.ok(res.request.size > 100, `request.size counts the head: ${res.request.size}`);
  assert.equal(res.request.tls, undefined);
  assert.equal(res.upstream_uri, '/base/items?b=2&flag&b=3&e=&sp=a+b%21');
  assert.equal(res.upstream_status, '200');
  assert.equal(res.response.status, 200);
  assert.equal(res.response.headers['x-upstream'], 'yes');
  assert.deepEqual(res.response.headers['set-cookie'], ['a=1', 'b=2']);
  assert.equal(res.response.headers['x-kong-request-id'], res.request.id);
  assert.ok(res.response.size > 5 + 50, `response.size counts the head and the body: ${res.response.size}`);
  assert.equal(typeof res.latencies.kong, 'number');
  assert.ok(res.latencies.proxy >= 0);
  assert.ok(res.latencies.request >= res.latencies.kong);
  assert.ok(res.latencies.receive >= 0);
  assert.equal(res.tries?.length, 1);
  assert.deepEqual({ ip: res.tries![0].ip, port: res.tries![0].port }, { ip: '127.0.0.1', port: upstream.port });
  assert.equal(res.tries![0].state, undefined);
  assert.equal(res.route.name, 'svc');
  assert.equal(res.service?.name, 'echo');
  assert.equal(res.consumer, undefined);
  assert.equal(res.authenticated_entity, undefined);
  assert.equal(res.client_ip, '127.0.0.1');
  assert.ok(res.started_at >= startedBefore - 1 && res.started_at <= Date.now(), `started_at ${res.started_at}`);
  assert.equal(res.source, 'upstream');
  assert.equal(res.workspace_name, 'default');
  // The whole object is what the logging plugins send: JSON, every field.
  assert.deepEqual(Object.keys(JSON.parse(JSON.stringify(res))).sort(), [
    'client_ip', 'latencies', 'request', 'response', 'route', 'service', 'source', 'started_at', 'tries', 'upstream_status', 'upstream_uri', 'workspace_name',
  ]);
});

test('an authenticated request carries the consumer and the authenticated entity', async () => {
  const res = await logOf(`${gw.http}/svc/teapot`, { 'x-user': 'alice' });
  assert.equal(res.response.status, 418);
  assert.equal(res.consumer?.username, 'alice');
  assert.deepEqual(res.authenticated_entity, { id: 'cred-1', consumer_id: '9b2a48a0-3a52-4b6e-a7b2-6a0e1b2f4c11' });
});

test("the gateway's own answer: source kong, its headers, no tries, the routed upstream_uri", async () => {
  const res = await logOf(`${gw.http}/svc/x?q=1`, { 'x-refuse': '1' });
  assert.equal(res.response.status, 403);
  assert.equal(res.response.headers['x-why'], 'refused');
  assert.equal(res.source, 'kong');
  assert.equal(res.upstream_status, '');
  assert.equal(res.latencies.proxy, -1);
  assert.equal(res.latencies.receive, 0);
  assert.equal(res.tries, undefined);
  assert.equal(res.upstream_uri, '/base/x');
});

test('failed tries are each listed, the last with the status answered', async () => {
  const res = await logOf(`${gw.http}/down`);
  assert.equal(res.response.status, 502);
  assert.equal(res.tries?.length, 3);
  for (const t of res.tries!) assert.deepEqual({ ip: t.ip, port: t.port, state: t.state }, { ip: '127.0.0.1', port: refusedPort, state: 'failed' });
  assert.equal(res.tries![2].code, 502);
  // nginx's $upstream_status: one status per try.
  assert.equal(res.upstream_status, '502, 502, 502');
  assert.equal(res.source, 'kong');
});

test('setLogValue: dotted names reach into objects, undefined removes, entities stay untouched', async () => {
  let res = await logOf(`${gw.http}/svc/a`, { 'x-log-set': 'route.extra.deep' });
  assert.deepEqual((res.route as unknown as Record<string, unknown>).extra, { deep: 'set' });
  res = await logOf(`${gw.http}/svc/a`, { 'x-log-set': 'my\\.dotted' });
  assert.equal(res['my.dotted'], 'set');
  res = await logOf(`${gw.http}/svc/a`, { 'x-log-remove': 'request.headers' });
  assert.equal(res.request.headers, undefined);
  // A name through a value that is not an object is skipped.
  res = await logOf(`${gw.http}/svc/a`, { 'x-log-set': 'client_ip.x' });
  assert.equal(res.client_ip, '127.0.0.1');
  res = await logOf(`${gw.http}/svc/a`);
  assert.equal((res.route as unknown as Record<string, unknown>).extra, undefined, 'the route the gateway keeps was not changed');
});

test('at most 100 request headers and 100 query arguments, as Kong reads them', async () => {
  const head = ['GET /svc/many?' + Array.from({ length: 150 }, (_, i) => `a${i}=${i}`).join('&') + ' HTTP/1.1', 'Host: example.test'];
  for (let i = 0; i < 150; i++) head.push(`x-h${i}: ${i}`);
  const before = serialized.length;
  await rawRequest(portOf(gw.http), head);
  const res = await waitFor(() => serialized[before], 'the log phase');
  assert.equal(Object.keys(res.request.headers).length, 100);
  assert.equal(Object.keys(res.request.querystring).length, 100);
  assert.equal(res.request.headers.host, 'example.test');
});
