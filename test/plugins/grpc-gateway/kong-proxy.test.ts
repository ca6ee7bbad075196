/**
 * Kong's grpc-gateway spec (spec/03-plugins/28-grpc-gateway/01-proxy_spec.lua) against a real gateway, a
 * real gRPC server, and an HTTP upstream that shows what the call carries (`TE: trailers`): REST rules and
 * their additional bindings, path variables, query args into fields (bools as Kong reads them), bodies,
 * Timestamps, grpc-status as the HTTP status, Kong's 400s. Beyond Kong's spec: a body into one field with a
 * nested path variable, enums and int64 in answers, the CORS preflight, an instance without a proto, an
 * authenticated consumer reaching the upstream as metadata, an unreachable upstream, a reload with a new
 * proto, and a proto that does not load refused as the config's error.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { aroundTests, request, startGateway, startUpstream, tempDir } from '../../helpers/gateway.ts';
import { pluginConfigErrors } from '../config-check.ts';
import { BOUNCER_PROTO, startBouncer } from './bouncer.ts';


describe('grpc-gateway (proxy)', () => {
  const started = aroundTests(async () => {
    const bouncer = await startBouncer();
    const mock = await startUpstream();
    const config = (proto: string) => ({
      _format_version: '3.0',
      services: [
        {
          name: 'grpc',
          protocol: 'grpc',
          host: '127.0.0.1',
          port: bouncer.port,
          routes: [
            { name: 'gateway', protocols: ['http', 'https'], paths: ['/'], plugins: [{ name: 'grpc-gateway', config: { proto } }] },
            { name: 'no-proto', hosts: ['no-proto.test'], paths: ['/'], plugins: [{ name: 'grpc-gateway' }] },
            {
              name: 'authenticated',
              hosts: ['auth.test'],
              paths: ['/'],
              plugins: [{ name: 'grpc-gateway', config: { proto } }, { name: 'key-auth' }],
            },
          ],
        },
        { name: 'mock', url: mock.url, routes: [{ name: 'mock', hosts: ['grpc_mock.example'], preserve_host: true, plugins: [{ name: 'grpc-gateway', config: { proto } }] }] },
        { name: 'down', protocol: 'grpc', host: '127.0.0.1', port: 1, routes: [{ name: 'down', hosts: ['down.test'], paths: ['/'], plugins: [{ name: 'grpc-gateway', config: { proto } }] }] },
      ],
      consumers: [{ username: 'lizard-keeper', keyauth_credentials: [{ key: 'secret-key' }] }],
    });
    const gw = await startGateway(config(BOUNCER_PROTO));
    return { gw, config, mock, close: async () => (await gw.stop(), await bouncer.close(), await mock.close()) };
  });
  const get = (path: string, headers: Record<string, string> = {}) => request(`${started.gw.http}${path}`, { headers });
  const post = (path: string, body: string | object, method = 'POST') => request(`${started.gw.http}${path}`, { method, body, headers: { 'content-type': 'application/json' } });

  for (const te of [undefined, 'chunked']) {
    test(`sets 'TE: trailers' upstream${te ? ', ignoring the client’s TE' : ''}, and makes the call a gRPC one`, async () => {
      const res = await request(`${started.gw.http}/v1/echo`, { method: 'POST', body: {}, headers: { host: 'grpc_mock.example', ...(te ? { te } : {}) } });
      assert.equal(res.status, 200);
      const received = started.mock.requests.at(-1)!;
      assert.equal(received.headers.te, 'trailers');
      assert.equal(received.headers['content-type'], 'application/grpc');
      assert.equal(received.headers.host, 'grpc_mock.example');
      assert.deepEqual([received.method, received.path], ['POST', '/targetservice.Bouncer/Echo']);
    });
  }

  test('main entrypoint', async () => {
    const res = await get('/v1/messages/john_doe');
    assert.equal(res.status, 200);
    assert.equal(res.headers['content-type'], 'application/json');
    assert.equal(res.headers['access-control-allow-origin'], '*');
    assert.deepEqual(res.json(), { reply: 'hello john_doe', boolean_test: false });
  });

  test('additional binding', async () => {
    const res = await get('/v1/messages/legacy/john_doe');
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), { reply: 'hello john_doe', boolean_test: false });
  });

  test('a {var=**} variable takes the rest of the path', async () => {
    assert.deepEqual((await get('/v1/messages/legacy/john/doe')).json(), { reply: 'hello john/doe', boolean_test: false });
  });

  test('removes unbound query args', async () => {
    const res = await get('/v1/messages/john_doe?arg1=1&arg2.test=2');
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), { reply: 'hello john_doe', boolean_test: false });
  });

  for (const [value, expected] of [['true', true], ['false', false], ['0', false], ['1', true]] as const) {
    test(`boolean behavior: ${value}`, async () => {
      const res = await get(`/v1/messages/legacy/john_doe?boolean_test=${value}`);
      assert.equal(res.status, 200);
      assert.deepEqual(res.json(), { reply: 'hello john_doe', boolean_test: expected });
    });
  }

  test('unknown path', async () => {
    const res = await get('/v1/messages/john_doe/bai');
    assert.equal(res.status, 400);
    assert.equal(res.text, 'failed to transcode .proto file Unknown path "/v1/messages/john_doe/bai"');
  });

  test('a method no rule names', async () => {
    const res = await request(`${started.gw.http}/v1/messages/john_doe`, { method: 'HEAD' });
    assert.equal(res.status, 400);
  });

  test('transforms grpc-status to HTTP status code', async () => {
    const res = await get('/v1/unknown/john_doe');
    // 12 UNIMPLEMENTED is a 500 (google/rpc/code.proto as Kong maps it).
    assert.equal(res.status, 500);
    assert.equal(res.headers['grpc-status'], '12');
    assert.equal(res.headers['content-type'], 'application/json');
  });

  test('known types transformations: Timestamp', async () => {
    const now = Math.floor(Date.now() / 1000);
    const nowIso = new Date(now * 1000).toISOString().slice(0, 19);
    const agoIso = new Date((now - 315) * 1000).toISOString().replace('.000', '');
    const res = await post('/bounce', { message: 'hi', when: agoIso, now: nowIso });
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), { now: nowIso, reply: 'hello hi', time_message: `${agoIso} was 315s ago` });
  });

  test('structured URI args', async () => {
    const query = 'name=lizard&hands.count=0&hands.endings=fingers&legs.count=4&legs.endings=toes&tail.count=0&tail.endings=tip';
    const res = await get(`/v1/grow/tail?${query}`);
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), {
      name: 'lizard',
      hands: { count: 0, endings: 'fingers' },
      legs: { count: 4, endings: 'toes' },
      tail: { count: 1, endings: 'tip' },
      kind: 'KIND_UNKNOWN',
      weight: 0,
    });
  });

  test('enums by name and int64 as numbers both ways', async () => {
    const res = await get('/v1/grow/tail?name=gecko&kind=LIZARD&weight=12345678901');
    assert.deepEqual(res.json(), { name: 'gecko', tail: { count: 1, endings: '' }, kind: 'LIZARD', weight: 12345678901 });
  });

  test('null in json', async () => {
    assert.equal((await post('/bounce', { message: null })).status, 400);
  });

  test('invalid json', async () => {
    const res = await post('/bounce', '{"message":"invalid}');
    assert.equal(res.status, 400);
    assert.match(res.text, /^decode json err: /);
  });

  test('a body that is not an object', async () => {
    const res = await post('/bounce', '[1]');
    assert.equal(res.status, 400);
    assert.equal(res.text, 'body must be a table');
  });

  test('field type mismatch', async () => {
    const res = await post('/bounce', '{"message":1}');
    assert.equal(res.status, 400);
    assert.equal(res.text, 'failed to encode payload');
  });

  test('regression: empty array in json (Kong #10801)', async () => {
    const res = await post('/v1/echo', { array: [], nullable: 'ahaha' });
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), { array: [], nullable: 'ahaha' });
    assert.ok(res.text.includes('[]'));
  });

  test('regression: empty message (Kong #10802)', async () => {
    const res = await post('/v1/echo', { array: [], nullable: '' });
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), { array: [], nullable: '' });
  });

  test('a body into one field, with a nested path variable and a wildcard segment', async () => {
    const res = await request(`${started.gw.http}/v1/bodies/gecko/limbs/front/tips/claws`, {
      method: 'PUT',
      body: { count: 4, endings: 'toes' },
      headers: { host: 'auth.test', apikey: 'secret-key' },
    });
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), {
      name: 'gecko',
      // The upstream names the consumer key-auth authenticated (X-Consumer-Username as metadata).
      hands: { count: 0, endings: 'lizard-keeper' },
      legs: { count: 4, endings: 'toes' },
      tail: { count: 0, endings: 'tips/claws' },
      kind: 'KIND_UNKNOWN',
      weight: 0,
    });
  });

  test('an authentication plugin still refuses first', async () => {
    const res = await request(`${started.gw.http}/v1/messages/john_doe`, { headers: { host: 'auth.test' } });
    assert.equal(res.status, 401);
  });

  test('a CORS preflight is answered here', async () => {
    const res = await request(`${started.gw.http}/v1/echo`, { method: 'OPTIONS' });
    assert.equal(res.status, 200);
    assert.equal(res.text, 'OK');
    assert.equal(res.headers['access-control-allow-origin'], '*');
    assert.equal(res.headers['access-control-allow-methods'], 'GET,POST,PATCH,DELETE');
    assert.equal(res.headers['access-control-allow-headers'], 'content-type');
  });

  test('without a proto every request is refused', async () => {
    const res = await get('/v1/messages/john_doe', { host: 'no-proto.test' });
    assert.equal(res.status, 400);
    assert.equal(res.text, 'transcoding requests require a .proto file defining the service');
  });

  test('a reload compiles the new proto; one that does not load is refused and the old one keeps serving', async () => {
    assert.equal(await started.gw.reload(started.config('/nonexistent/bouncer.proto')), false);
    assert.equal((await get('/v1/messages/john_doe')).status, 200);
    const renamed = join(tempDir(), 'renamed.proto');
    writeFileSync(renamed, readFileSync(BOUNCER_PROTO, 'utf8').replace('/v1/messages/{greeting}', '/v2/greetings/{greeting}'));
    assert.equal(await started.gw.reload(started.config(renamed)), true);
    assert.deepEqual((await get('/v2/greetings/ada')).json(), { reply: 'hello ada', boolean_test: false });
    assert.equal((await get('/v1/messages/ada')).status, 400);
    assert.equal(await started.gw.reload(started.config(BOUNCER_PROTO)), true);
  });

  test('an upstream that cannot be reached is a 502', async () => {
    const res = await get('/v1/messages/john_doe', { host: 'down.test' });
    assert.equal(res.status, 502);
    assert.equal(res.json().message, 'An invalid response was received from the upstream server');
  });
});

describe('grpc-gateway (schema)', () => {
  test('proto is optional, and one that does not load is the config error', async () => {
    assert.deepEqual(await pluginConfigErrors('grpc-gateway', {}), []);
    assert.deepEqual(await pluginConfigErrors('grpc-gateway', { proto: BOUNCER_PROTO }), []);
    const [missing] = await pluginConfigErrors('grpc-gateway', { proto: '/nonexistent/x.proto' });
    assert.match(missing, /^config\.proto: cannot load \/nonexistent\/x\.proto: /);
  });
});
