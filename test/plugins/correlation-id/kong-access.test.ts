/**
 * Kong's correlation-id catalogue (spec/03-plugins/11-correlation-id/01-access_spec.lua, 02-schema_spec.lua)
 * against a real gateway: the uuid#counter, uuid and tracker generators (HTTP and gRPC), echo_downstream on
 * proxied answers, on a failing upstream and on another plugin's answer, a custom header name, ids the
 * client sent (kept, unless empty), and the id in the access log line (`correlation_id`).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request, spawnGateway, startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { echoClient, startGrpcEcho, unary, type GrpcEcho } from '../../fixtures/grpc-echo.ts';
import { closedPort, waitFor } from '../../helpers/support.ts';
import { pluginConfigErrors } from '../config-check.ts';

const UUID = '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}';
const UUID_PATTERN = new RegExp(`^${UUID}$`);
const UUID_COUNTER_PATTERN = new RegExp(`^${UUID}#\\d+$`);
const TRACKER_PATTERN = /^\d+\.\d+\.\d+\.\d+-\d+-\d+-\d+-\d+-\d+\.\d{3}$/;

const correlation = (config: Record<string, unknown> = {}) => ({ name: 'correlation-id', config });

describe('correlation-id (access)', () => {
  let upstream: Upstream;
  let grpcUpstream: GrpcEcho;
  let gw: TestGateway;

  before(async () => {
    upstream = await startUpstream();
    grpcUpstream = await startGrpcEcho();
    const dead = `http://127.0.0.1:${await closedPort()}`;
    gw = await startGateway({
      services: [
        {
          name: 'mock',
          url: upstream.url,
          routes: [
            { name: 'r1', hosts: ['correlation1.test'], plugins: [correlation()] },
            { name: 'r2', hosts: ['correlation2.test'], plugins: [correlation({ header_name: 'Foo-Bar-Id' })] },
            { name: 'r3', hosts: ['correlation3.test'], plugins: [correlation({ generator: 'uuid', echo_downstream: true })] },
            { name: 'tracker', hosts: ['correlation-tracker.test'], plugins: [correlation({ generator: 'tracker' })] },
            { name: 'r5', hosts: ['correlation5.test'], plugins: [correlation({ generator: 'uuid', echo_downstream: true }), { name: 'request-termination', config: { status_code: 418 } }] },
          ],
        },
        { name: 'dead', url: dead, retries: 0, routes: [{ name: 'timeout', hosts: ['correlation-timeout.test'], plugins: [correlation({ generator: 'uuid', echo_downstream: true })] }] },
        { name: 'grpc', url: `grpc://127.0.0.1:${grpcUpstream.port}`, routes: [{ name: 'grpc', protocols: ['grpc'], paths: ['/tollgate.test.Echo/'], plugins: [correlation({ echo_downstream: true })] }] },
      ],
    });
  });

  after(async () => {
    await gw?.stop();
    await upstream?.close();
    await grpcUpstream?.close();
  });

  const GET = (host: string, headers: Record<string, string> = {}) => request(`${gw.http}/request`, { headers: { host, ...headers } });

  test('uuid-worker generator: increments the counter part', async () => {
    const id1 = (await GET('correlation1.test')).json().headers['kong-request-id'];
    const id2 = (await GET('correlation1.test')).json().headers['kong-request-id'];
    assert.match(id1, UUID_COUNTER_PATTERN);
    assert.match(id2, UUID_COUNTER_PATTERN);
    assert.notEqual(id1, id2);
    assert.equal(id1.split('#')[0], id2.split('#')[0], 'one uuid per gateway process');
    assert.equal(Number(id2.split('#')[1]), Number(id1.split('#')[1]) + 1);
  });

  test('uuid-worker generator: increments the counter part #grpc', async () => {
    const client = echoClient(new URL(gw.h2c).host);
    try {
      const ids: string[] = [];
      for (let i = 0; i < 2; i++) {
        const { headers, reply } = await unary(client, { message: 'x' });
        assert.equal(reply.metadata['kong-request-id'], headers['kong-request-id'], 'the id sent upstream is echoed');
        ids.push(String(headers['kong-request-id']));
      }
      for (const id of ids) assert.match(id, UUID_COUNTER_PATTERN);
      assert.ok(Number(ids[1].split('#')[1]) > Number(ids[0].split('#')[1]));
    } finally {
      client.close();
    }
  });

  test('uuid generator: generates a unique UUID for every request', async () => {
    const id1 = (await GET('correlation3.test')).json().headers['kong-request-id'];
    const id2 = (await GET('correlation3.test')).json().headers['kong-request-id'];
    assert.match(id1, UUID_PATTERN);
    assert.match(id2, UUID_PATTERN);
    assert.notEqual(id1, id2);
  });

  test('tracker generator: generates a unique tracker id for every request', async () => {
    const id1 = (await GET('correlation-tracker.test')).json().headers['kong-request-id'];
    const id2 = (await GET('correlation-tracker.test')).json().headers['kong-request-id'];
    assert.match(id1, TRACKER_PATTERN);
    assert.match(id2, TRACKER_PATTERN);
    assert.notEqual(id1, id2);
  });

  test('echo_downstream sends uuid back to client', async () => {
    const res = await GET('correlation3.test');
    const upstreamId = res.json().headers['kong-request-id'];
    assert.match(upstreamId, UUID_PATTERN);
    assert.equal(res.headers['kong-request-id'], upstreamId);
  });

  test('echo_downstream sends uuid back to client even when the upstream fails', async () => {
    const res = await GET('correlation-timeout.test');
    assert.equal(res.status, 502);
    assert.match(String(res.headers['kong-request-id']), UUID_PATTERN);
  });

  test('echo_downstream does not send uuid back to client if not asked', async () => {
    const res = await GET('correlation2.test');
    assert.equal(res.status, 200);
    assert.equal(res.headers['kong-request-id'], undefined);
  });

  test('uses a custom header name', async () => {
    assert.match((await GET('correlation2.test')).json().headers['foo-bar-id'], UUID_COUNTER_PATTERN);
  });

  test('preserves an already existing header', async () => {
    const res = await GET('correlation2.test', { 'Foo-Bar-Id': 'foobar' });
    assert.equal(res.json().headers['foo-bar-id'], 'foobar');
  });

  test('does not preserve an already existing empty header', async () => {
    const res = await GET('correlation2.test', { 'Foo-Bar-Id': '' });
    assert.match(res.json().headers['foo-bar-id'], UUID_COUNTER_PATTERN);
  });

  test('does not preserve an already existing header with space only', async () => {
    const res = await GET('correlation2.test', { 'Foo-Bar-Id': ' ' });
    assert.match(res.json().headers['foo-bar-id'], UUID_COUNTER_PATTERN);
  });

  test("echoes on another plugin's answer", async () => {
    const res = await GET('correlation5.test');
    assert.equal(res.status, 418);
    assert.match(String(res.headers['kong-request-id']), UUID_PATTERN);
  });

  test("echoes the incoming id on another plugin's answer", async () => {
    const res = await GET('correlation5.test', { 'kong-request-id': 'my very personal id' });
    assert.equal(res.status, 418);
    assert.equal(res.headers['kong-request-id'], 'my very personal id');
  });
});

describe('correlation-id (log serializer)', () => {
  test('the access log line contains the correlation id', async () => {
    const upstream = await startUpstream();
    const gw = await spawnGateway({
      gateway: { log_level: 'info', proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'] },
      services: [{ name: 's', url: upstream.url, routes: [{ name: 'serializer', hosts: ['correlation-serializer.test'], plugins: [correlation()] }] }],
    });
    try {
      const res = await request(`${gw.http}/`, { headers: { host: 'correlation-serializer.test', 'Kong-Request-ID': '1234' } });
      assert.equal(res.status, 200);
      await waitFor(() => gw.output().includes('"type":"access"'), 'the access log line');
      const line = JSON.parse(gw.output().split('\n').find((l) => l.includes('"type":"access"'))!);
      assert.equal(line.correlation_id, '1234');
      assert.equal(line.route, 'serializer');
    } finally {
      gw.kill();
      await gw.exited;
      await upstream.close();
    }
  });
});

describe('correlation-id (schema)', () => {
  test('defaults', async () => assert.deepEqual(await pluginConfigErrors('correlation-id', {}), []));
  test('generator must be one of Kong\'s', async () => {
    assert.deepEqual(await pluginConfigErrors('correlation-id', { generator: 'random' }), ['config.generator: expected one of: uuid, uuid#counter, tracker']);
  });
  test('header_name must be usable as a header', async () => {
    assert.deepEqual(await pluginConfigErrors('correlation-id', { header_name: 'bad header' }), ["config.header_name: bad header name 'bad header', allowed characters are A-Z, a-z, 0-9, '_', and '-'"]);
  });
});
