/**
 * Kong's request-termination catalogue (spec/03-plugins/14-request-termination/01-schema_spec.lua,
 * 02-access_spec.lua, 03-integration_spec.lua), against a real gateway and upstream: default and custom
 * statuses and messages, raw bodies with their content type, 204 without Content-Length, routes without a
 * service, echo and trigger (header or query), gRPC-shaped answers, consumer-scoped instances, and the
 * schema's checks.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request, startGateway, startUpstream, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { echoClient, grpc, startGrpcEcho, unary, type EchoClient, type GrpcEcho } from '../../fixtures/grpc-echo.ts';
import { issueToken, oauth2Plugin, tokenIssuerConfig } from '../../fixtures/oauth2-setup.ts';
import { pluginConfigErrors } from '../config-check.ts';

const termination = (config: Record<string, unknown> = {}) => [{ name: 'request-termination', config }];

describe('request-termination (access)', () => {
  let upstream: Upstream;
  let grpcUpstream: GrpcEcho;
  let gw: TestGateway;
  let client: EchoClient;
  let token: string;
  const issuer = tokenIssuerConfig();

  before(async () => {
    upstream = await startUpstream();
    grpcUpstream = await startGrpcEcho();
    gw = await startGateway({
      services: [
        {
          name: 'mock',
          url: upstream.url,
          routes: [
            { name: 'api1', hosts: ['api1.request-termination.test'], plugins: termination() },
            { name: 'api2', hosts: ['api2.request-termination.test'], plugins: termination({ status_code: 404 }) },
            { name: 'api3', hosts: ['api3.request-termination.test'], plugins: termination({ status_code: 406, message: 'Invalid' }) },
            { name: 'api4', hosts: ['api4.request-termination.test'], plugins: termination({ body: '<html><body><h1>Service is down for maintenance</h1></body></html>' }) },
            {
              name: 'api5',
              hosts: ['api5.request-termination.test'],
              plugins: termination({ status_code: 451, content_type: 'text/html', body: '<html><body><h1>Service is down due to content infringement</h1></body></html>' }),
            },
            { name: 'api6', hosts: ['api6.request-termination.test'], plugins: termination({ status_code: 503, body: '{"code": 1, "message": "Service unavailable"}' }) },
            { name: 'api8', hosts: ['api8.request-termination.test'], plugins: termination({ status_code: 204 }) },
            { name: 'api9', hosts: ['api9.request-termination.test'], strip_path: false, paths: ['~/(?<parameter>[^#?/]+)/200'], plugins: termination({ echo: true, status_code: 404 }) },
            { name: 'api10', hosts: ['api10.request-termination.test'], plugins: termination({ echo: true, trigger: 'gimme-an-echo', status_code: 404 }) },
            // As Kong's exports write a config: every unset field an explicit null.
            { name: 'exported', hosts: ['exported.request-termination.test'], plugins: termination({ status_code: 503, message: null, body: null, content_type: null, trigger: null, echo: false }) },
            { name: 'consumer-scoped', hosts: ['consumer.request-termination.test'], plugins: [oauth2Plugin()] },
          ],
        },
        { name: 'grpc', url: `grpc://127.0.0.1:${grpcUpstream.port}`, routes: [{ name: 'grpc', protocols: ['grpc'], paths: ['/tollgate.test.Echo/'], plugins: termination({ status_code: 503 }) }] },
      ],
      // A route without a service (Kong's db.routes:insert without service).
      routes: [{ name: 'api7', hosts: ['api7.request-termination.test'], plugins: termination() }, ...issuer.routes],
      consumers: [{ ...issuer.consumers[0], plugins: termination() }],
    });
    token = await issueToken(gw.https);
    client = echoClient(new URL(gw.h2c).host);
  });

  after(async () => {
    client?.close();
    await gw?.stop();
    await upstream?.close();
    await grpcUpstream?.close();
  });

  const get = (host: string, path = '/status/200', options: { headers?: Record<string, string>; body?: string } = {}) =>
    request(gw.http + path, { headers: { host, ...options.headers }, body: options.body });

  test('default status code and message', async () => {
    const res = await get('api1.request-termination.test');
    assert.equal(res.status, 503);
    assert.deepEqual(res.json(), { message: 'Service unavailable' });
  });

  test('default status code and message with serviceless route', async () => {
    const res = await get('api7.request-termination.test');
    assert.equal(res.status, 503);
    assert.deepEqual(res.json(), { message: 'Service unavailable' });
  });

  test("a Kong export's nulls (trigger, body, message) are unset fields", async () => {
    const res = await request(`${gw.http}/`, { headers: { host: 'exported.request-termination.test' } });
    assert.equal(res.status, 503);
    assert.deepEqual(res.json(), { message: 'Service unavailable' });
  });

  test('status code with default message', async () => {
    const res = await get('api2.request-termination.test');
    assert.equal(res.status, 404);
    assert.deepEqual(res.json(), { message: 'Not found' });
  });

  test('status code with custom message', async () => {
    const res = await get('api3.request-termination.test');
    assert.equal(res.status, 406);
    assert.deepEqual(res.json(), { message: 'Invalid' });
  });

  test('returns 204 without content length header', async () => {
    const res = await get('api8.request-termination.test', '/status/204');
    assert.equal(res.status, 204);
    assert.equal(res.headers['content-length'], undefined);
  });

  test('default status code and body', async () => {
    const res = await get('api4.request-termination.test');
    assert.equal(res.status, 503);
    assert.equal(res.text, '<html><body><h1>Service is down for maintenance</h1></body></html>');
  });

  test('status code with a body and its content type', async () => {
    const res = await get('api5.request-termination.test');
    assert.equal(res.status, 451);
    assert.equal(res.headers['content-type'], 'text/html');
    assert.equal(res.text, '<html><body><h1>Service is down due to content infringement</h1></body></html>');
  });

  test('status code with default message #grpc', async () => {
    const err = await unary(client, { message: 'x' }).then(
      () => assert.fail('the call should fail'),
      (e: grpc.ServiceError) => e,
    );
    assert.equal(err.code, grpc.status.UNAVAILABLE);
    assert.equal(err.details, 'Service unavailable');
  });

  test('a raw JSON body is sent as it is', async () => {
    const res = await get('api6.request-termination.test');
    assert.equal(res.status, 503);
    assert.deepEqual(res.json(), { code: 1, message: 'Service unavailable' });
  });

  test('returns server tokens with Server header', async () => {
    const res = await get('api1.request-termination.test');
    assert.equal(res.headers.server, 'tollgate/0.1.0');
  });

  test('echos a request if no trigger is set', async () => {
    const res = await get('api9.request-termination.test', '/status/200?hello=there', { body: 'cool body' });
    assert.equal(res.status, 404);
    const json = res.json();
    assert.equal(json.matched_route.hosts[0], 'api9.request-termination.test');
    assert.equal(json.kong.node_id.length, 36);
    assert.deepEqual(json.request, {
      headers: { 'content-length': '9', host: 'api9.request-termination.test', connection: 'close' },
      host: 'api9.request-termination.test',
      method: 'GET',
      path: '/status/200',
      port: Number(new URL(gw.http).port),
      query: { hello: 'there' },
      raw_body: 'cool body',
      scheme: 'http',
      uri_captures: { named: { parameter: 'status' }, unnamed: ['status'] },
    });
  });

  test("doesn't echo a request if the trigger is set but not specified", async () => {
    const res = await get('api10.request-termination.test');
    assert.equal(res.status, 200);
  });

  test('echos a request if the trigger is specified as a header', async () => {
    const res = await get('api10.request-termination.test', '/status/200?hello=there', { headers: { 'Gimme-An-Echo': 'anything will do' }, body: 'cool body' });
    assert.equal(res.status, 404);
    const json = res.json();
    assert.equal(json.request.headers['gimme-an-echo'], 'anything will do');
    assert.deepEqual(json.request.uri_captures, { named: {}, unnamed: [] });
    assert.equal(json.request.raw_body, 'cool body');
  });

  test('echos a request if the trigger is specified as a query parameter', async () => {
    const res = await get('api10.request-termination.test', '/status/200?hello=there&gimme-an-echo=anything%20will%20do', { body: 'cool body' });
    assert.equal(res.status, 404);
    assert.deepEqual(res.json().request.query, { hello: 'there', 'gimme-an-echo': 'anything will do' });
  });

  test('can be applied on a consumer (integration, with oauth2 identifying the consumer)', async () => {
    const url = `${gw.https}/request`;
    const anonymous = await request(url, { headers: { host: 'consumer.request-termination.test' } });
    assert.equal(anonymous.status, 401, 'the consumer-scoped instance does not apply before authentication');
    const res = await request(url, { headers: { host: 'consumer.request-termination.test', authorization: `Bearer ${token}` } });
    assert.equal(res.status, 503);
    assert.deepEqual(res.json(), { message: 'Service unavailable' });
  });
});

describe('request-termination (schema)', () => {
  const check = (config: Record<string, unknown>) => pluginConfigErrors('request-termination', config);

  test('should accept a valid status_code', async () => assert.deepEqual(await check({ status_code: 404 }), []));
  test('should accept a valid message', async () => assert.deepEqual(await check({ message: 'Not found' }), []));
  test('should accept a valid content_type', async () => assert.deepEqual(await check({ content_type: 'text/html', body: '<body><h1>Service is down for maintenance</h1></body>' }), []));
  test('should accept a valid body', async () => assert.deepEqual(await check({ body: '<body><h1>Service is down for maintenance</h1></body>' }), []));

  test('status_code should only accept integers', async () => {
    assert.deepEqual(await check({ status_code: 'abcd' }), ['config.status_code: expected an integer']);
  });
  test('status_code is limited to 100..599', async () => {
    assert.deepEqual(await check({ status_code: 99 }), ['config.status_code: value should be between 100 and 599']);
    assert.deepEqual(await check({ status_code: 600 }), ['config.status_code: value should be between 100 and 599']);
  });
  test('message with body throws an error', async () => {
    assert.deepEqual(await check({ message: 'error', body: '<body><h1>Service is down for maintenance</h1></body>' }), ['config: message cannot be used with content_type or body']);
  });
  test('message with body and content_type throws an error', async () => {
    assert.deepEqual(await check({ message: 'error', content_type: 'text/html', body: '<body><h1>Service is down for maintenance</h1></body>' }), ['config: message cannot be used with content_type or body']);
  });
  test('content_type without body throws an error', async () => {
    assert.deepEqual(await check({ content_type: 'text/html' }), ['config: content_type requires a body']);
  });
  test('echo with body or content_type throws an error', async () => {
    assert.deepEqual(await check({ echo: true, body: 'x' }), ['config: echo cannot be used with content_type and body']);
  });
  test('trigger must be a valid header name', async () => {
    assert.deepEqual(await check({ trigger: 'not a header' }), ["config.trigger: bad header name 'not a header', allowed characters are A-Z, a-z, 0-9, '_', and '-'"]);
  });
});
