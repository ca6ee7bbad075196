/**
 * Kong's aws-lambda spec (spec/03-plugins/27-aws-lambda/99-access_spec.lua, 02-schema_spec.lua) against
 * a real gateway and a stand-in Lambda service that verifies every call's SigV4 signature itself: the
 * default payload (query and body parameters), forward_request_*, API Gateway's proxy event, the
 * invocation types, unhandled function errors and unhandled_status, is_proxy_integration's answers and
 * its 502s, legacy and correct empty arrays, Via, timeouts and a refused signature as Kong's 500, a
 * secret from a vault reference. And the signer against AWS's published test vectors.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { aroundTests, request, startGateway } from '../../helpers/gateway.ts';
import { pluginConfigErrors } from '../config-check.ts';
import { startLambdaStandIn } from './stand-in.ts';

const KEY = 'AKIDTOLLGATETEST';
const SECRET = 'wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY';
const VAULT_VARIABLE = 'I31_TEST_LAMBDA_SECRET';

describe('aws-lambda (access)', () => {
  before(() => (process.env[VAULT_VARIABLE] = SECRET));
  after(() => delete process.env[VAULT_VARIABLE]);

  const started = aroundTests(async () => {
    const lambda = await startLambdaStandIn({ [KEY]: SECRET });
    const base = { aws_key: KEY, aws_secret: SECRET, aws_region: 'us-east-1', host: '127.0.0.1', port: lambda.port, disable_https: true, function_name: 'kongLambdaTest' };
    const route = (name: string, config: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
      name,
      hosts: [`${name}.test`],
      plugins: [{ name: 'aws-lambda', config: { ...base, ...config } }],
      ...extra,
    });
    const gw = await startGateway({
      _format_version: '3.0',
      // A service the plugin never calls: Kong's "ignores route's service".
      services: [{ name: 'unused', url: 'http://127.0.0.1:1', routes: [route('lambda', {}), route('lambda-qualified', { qualifier: 'v1', function_name: 'arn:aws:lambda:us-east-1:123456789012:function:echo' })] }],
      routes: [
        route('forward', { forward_request_method: true, forward_request_uri: true, forward_request_headers: true, forward_request_body: true }),
        route('event', { invocation_type: 'Event' }),
        route('dryrun', { invocation_type: 'DryRun' }),
        route('unhandled', { function_name: 'functionWithUnhandledError' }),
        route('unhandled-412', { function_name: 'functionWithUnhandledError', unhandled_status: 412 }),
        route('proxy', { function_name: 'functionReturningGiven', is_proxy_integration: true }),
        route('empty-legacy', { function_name: 'functionWithEmptyArray' }),
        route('empty-correct', { function_name: 'functionWithEmptyArray', empty_arrays_mode: 'correct' }),
        route('gateway-event', { awsgateway_compatible: true }, { paths: ['~/users/(?<user>[^/]+)$'] }),
        route('slow', { function_name: 'slowFunction', timeout: 100 }),
        route('bad-secret', { aws_secret: 'not-the-secret' }),
        route('vault', { aws_secret: `{vault://env/${VAULT_VARIABLE.toLowerCase()}}` }),
        route('no-region', { aws_region: undefined }),
      ],
    });
    return { gw, lambda, close: async () => (await gw.stop(), await lambda.close()) };
  });

  const call = (host: string, path = '/', options: { method?: string; body?: string | object; headers?: Record<string, string> } = {}) =>
    request(`${started.gw.http}${path}`, { method: options.method, body: options.body, headers: { host: `${host}.test`, ...options.headers } });
  const lastInvocation = () => started.lambda.invocations.at(-1)!;

  test('invokes a Lambda function with GET (query args), ignoring the route’s service, signed with SigV4', async () => {
    const res = await call('lambda', '/get?key1=some_value1&key2=some_value2&key3=some_value3');
    assert.equal(res.status, 200);
    assert.deepEqual(res.json(), { key1: 'some_value1', key2: 'some_value2', key3: 'some_value3' });
    assert.equal(res.headers['x-amzn-requestid'], 'foo');
    const invocation = lastInvocation();
    assert.equal(invocation.method, 'POST');
    assert.equal(invocation.path, '/2015-03-31/functions/kongLambdaTest/invocations');
    assert.equal(invocation.headers['x-amz-invocation-type'], 'RequestResponse');
    assert.equal(invocation.headers['x-amz-log-type'], 'Tail');
    assert.match(String(invocation.headers.authorization), new RegExp(`^AWS4-HMAC-SHA256 Credential=${KEY}/\\d{8}/us-east-1/lambda/aws4_request, `));
  });

  test('invokes a Lambda function with POST params, and a JSON body merged over the query', async () => {
    const form = await call('lambda', '/post', { method: 'POST', body: 'key1=some_value_post1&key3=some_value_post3', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    assert.deepEqual(form.json(), { key1: 'some_value_post1', key3: 'some_value_post3' });
    const both = await call('lambda', '/post?key1=from_querystring&key2=q', { method: 'POST', body: { key2: 'from_body' } });
    assert.deepEqual(both.json(), { key1: 'from_querystring', key2: 'from_body' });
  });

  test('a qualifier and a function ARN go in the signed path and query', async () => {
    assert.equal((await call('lambda-qualified', '/')).status, 200);
    const invocation = lastInvocation();
    assert.equal(invocation.path, '/2015-03-31/functions/arn%3Aaws%3Alambda%3Aus-east-1%3A123456789012%3Afunction%3Aecho/invocations');
    assert.equal(invocation.query.get('Qualifier'), 'v1');
  });

  test('forward_request_*: method, uri and its args, headers, and an XML body as text', async () => {
    const res = await call('forward', '/post?key1=from_querystring', { method: 'POST', body: '<xml/>', headers: { 'content-type': 'application/xml', 'custom-header': 'someheader' } });
    const body = res.json();
    assert.equal(body.request_method, 'POST');
    assert.equal(body.request_uri, '/post?key1=from_querystring');
    assert.deepEqual(body.request_uri_args, { key1: 'from_querystring' });
    assert.equal(body.request_headers['custom-header'], 'someheader');
    assert.equal(body.request_headers.host, 'forward.test');
    assert.equal(body.request_body, '<xml/>');
    assert.deepEqual(body.request_body_args, {});
  });

  test('forward_request_body: a JSON body with its args, and a binary body in base64', async () => {
    const json = (await call('forward', '/post', { method: 'POST', body: { key1: 'some_value', key2: 'some_value' } })).json();
    assert.equal(json.request_body_args.key2, 'some_value');
    const binary = (await call('forward', '/post', { method: 'POST', body: '01234', headers: { 'content-type': 'application/octet-stream' } })).json();
    assert.equal(binary.request_body, Buffer.from('01234').toString('base64'));
    assert.equal(binary.request_body_base64, true);
  });

  test('invocation types Event and DryRun answer 202 and 204', async () => {
    assert.equal((await call('event', '/', { method: 'POST', body: 'key1=a', headers: { 'content-type': 'application/x-www-form-urlencoded' } })).status, 202);
    assert.equal((await call('dryrun', '/')).status, 204);
  });

  test('an unhandled function error is 200 without unhandled_status, that status with it', async () => {
    const plain = await call('unhandled', '/');
    assert.equal(plain.status, 200);
    assert.equal(plain.headers['x-amz-function-error'], 'Unhandled');
    const mapped = await call('unhandled-412', '/');
    assert.equal(mapped.status, 412);
    assert.equal(mapped.headers['x-amz-function-error'], 'Unhandled');
  });

  test('returns Via and Content-Length', async () => {
    const res = await call('lambda', '/get?key1=a');
    assert.equal(res.headers.via, '1.1 tollgate/0.1.0');
    assert.equal(Number(res.headers['content-length']), res.body.length);
  });

  describe('is_proxy_integration', () => {
    const proxied = (response: unknown) => call('proxy', '/', { method: 'POST', body: { response: typeof response === 'string' ? response : JSON.stringify(response) } });

    test('sets the status, headers and body of the custom response', async () => {
      const body = JSON.stringify({ some: 'json', with: ['an', 'array'] });
      const res = await proxied({ statusCode: 201, headers: { 'X-Custom-Header': 'Hello world!' }, body });
      assert.equal(res.status, 201);
      assert.equal(res.headers['x-custom-header'], 'Hello world!');
      assert.equal(res.text, body);
      const empty = await proxied({ statusCode: 201 });
      assert.equal(empty.status, 201);
      assert.equal(empty.text, '');
    });

    test('overrides the service headers with the response’s, and takes multiValueHeaders', async () => {
      const res = await proxied({ statusCode: 201, headers: { 'x-amzn-RequestId': 'bar', Age: '3600' }, multiValueHeaders: { 'Access-Control-Allow-Origin': ['site1.com', 'site2.com'] } });
      assert.equal(res.headers['x-amzn-requestid'], 'bar');
      assert.equal(res.headers.age, '3600');
      assert.equal(res.headers['access-control-allow-origin'], 'site1.com, site2.com');
      assert.equal((await proxied({ statusCode: 201, body: 'test', multiValueHeaders: null })).text, 'test');
    });

    test('decodes a base64 body, and keeps one that says it is not', async () => {
      assert.equal((await proxied({ statusCode: 200, body: 'dGVzdA==', isBase64Encoded: true })).text, 'test');
      assert.equal((await proxied({ statusCode: 200, body: 'dGVzdA=', isBase64Encoded: false })).text, 'dGVzdA=');
    });

    for (const [what, response] of [
      ['statusCode is not a number', { statusCode: 'hello', body: 'x' }],
      ['headers is not a table', { statusCode: 200, headers: 'x', body: 'x' }],
      ['body is not a string', { statusCode: 200, body: 1234 }],
      ['isBase64Encoded is not a boolean', { statusCode: 200, body: 'dGVzdA=', isBase64Encoded: 'abc' }],
      ['the answer is not JSON', '{"foo":"bar"'],
      ['the answer is empty', ''],
    ] as const) {
      test(`502 when ${what}`, async () => {
        const res = await proxied(response);
        assert.equal(res.status, 502);
        assert.equal(res.json().message, 'Bad Gateway');
        assert.match(res.json().error, /^could not JSON decode Lambda function response: /);
      });
    }
  });

  test('empty arrays: {} in legacy mode, [] in correct mode', async () => {
    assert.match((await call('empty-legacy', '/get')).text, /"testbody":\{\}/);
    assert.match((await call('empty-correct', '/get')).text, /"testbody": ?\[\]/);
  });

  test("awsgateway_compatible: API Gateway's proxy event", async () => {
    const res = await call('gateway-event', '/users/ada?x=1&x=2&y=3', { method: 'POST', body: 'hi', headers: { 'content-type': 'text/plain', 'user-agent': 'test-agent' } });
    const event = res.json();
    assert.equal(event.version, '1.0');
    assert.equal(event.httpMethod, 'POST');
    assert.equal(event.path, '/users/ada');
    assert.deepEqual(event.pathParameters, { user: 'ada' });
    assert.deepEqual(event.queryStringParameters, { x: '1', y: '3' });
    assert.deepEqual(event.multiValueQueryStringParameters, { x: ['1', '2'], y: ['3'] });
    assert.equal(event.headers['user-agent'], 'test-agent');
    assert.deepEqual(event.multiValueHeaders['content-type'], ['text/plain']);
    assert.equal(event.body, Buffer.from('hi').toString('base64'));
    assert.equal(event.isBase64Encoded, true);
    assert.equal(event.requestContext.domainName, 'gateway-event.test');
    assert.equal(event.requestContext.domainPrefix, 'gateway-event');
    assert.equal(event.requestContext.identity.sourceIp, '127.0.0.1');
    assert.equal(event.requestContext.protocol, 'HTTP/1.1');
    assert.match(event.requestContext.requestTime, /^\d\d\/\w{3}\/\d{4}:\d\d:\d\d:\d\d \+0000$/);
  });

  test("a call that times out, one whose signature the service refuses, and no region are Kong's 500", async () => {
    for (const host of ['slow', 'bad-secret', 'no-region']) {
      const res = await call(host, '/');
      assert.equal(res.status, 500, host);
      assert.equal(res.json().message, 'An unexpected error occurred');
    }
  });

  test('aws_secret from a vault reference', async () => {
    assert.equal((await call('vault', '/get?key1=v')).json().key1, 'v');
  });
});

describe('aws-lambda (schema)', () => {
  test("Kong's entity checks and field checks", async () => {
    assert.deepEqual(await pluginConfigErrors('aws-lambda', { function_name: 'f', aws_region: 'us-east-1' }), []);
    assert.deepEqual(await pluginConfigErrors('aws-lambda', { aws_key: 'k' }), ["config: all or none of these fields must be set: 'config.aws_key', 'config.aws_secret'"]);
    assert.deepEqual(await pluginConfigErrors('aws-lambda', { proxy_url: 'https://proxy.example' }), ['config: proxy_url scheme must be http']);
    assert.deepEqual(await pluginConfigErrors('aws-lambda', { unhandled_status: 99 }), ['config.unhandled_status: value should be between 100 and 999']);
    assert.deepEqual(await pluginConfigErrors('aws-lambda', { invocation_type: 'Sync' }), ['config.invocation_type: expected one of: RequestResponse, Event, DryRun']);
    assert.match((await pluginConfigErrors('aws-lambda', { aws_assume_role_arn: 'arn:aws:iam::1:role/r' }))[0], /^config\.aws_assume_role_arn: assuming a role through STS is not supported/);
  });

  test('an unresolvable vault reference is an error at its field', async () => {
    const [error] = await pluginConfigErrors('aws-lambda', { aws_key: 'k', aws_secret: '{vault://env/i31_no_such_variable}' });
    assert.match(error, /^config\.aws_secret: cannot resolve /);
  });
});
