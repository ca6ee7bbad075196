/**
 * Every bundled plugin's refusal, body byte for byte, as Kong's handler.lua makes it: the plugins that call
 * `kong.response.error` (key-auth, basic-auth, acl, ip-restriction, rate-limiting, bot-detection,
 * request-size-limiting) answer Kong 3.x's `{"message": ..., "request_id": ...}` with the request's id;
 * those that call `kong.response.exit` (jwt, oauth2, request-termination, redirect, cors' preflight)
 * answer their own body, without a request id.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { gatewayOnEchoUpstreamAroundTests, request, type Reply } from '../../helpers/gateway.ts';

const route = (name: string, ...plugins: Record<string, unknown>[]) => ({ name, hosts: [`${name}.test`], plugins });

describe('refusal bodies of the bundled plugins', () => {
  const started = gatewayOnEchoUpstreamAroundTests((url) => ({
    services: [
      {
        name: 'mock',
        url,
        routes: [
          route('key-auth', { name: 'key-auth', config: {} }),
          route('basic-auth', { name: 'basic-auth', config: {} }),
          route('acl', { name: 'key-auth', config: {} }, { name: 'acl', config: { allow: ['admins'] } }),
          route('ip-restriction', { name: 'ip-restriction', config: { deny: ['127.0.0.1'] } }),
          route('rate-limiting', { name: 'rate-limiting', config: { minute: 1, limit_by: 'ip' } }),
          route('bot-detection', { name: 'bot-detection', config: {} }),
          route('request-size-limiting', { name: 'request-size-limiting', config: { allowed_payload_size: 1, size_unit: 'bytes' } }),
          route('jwt', { name: 'jwt', config: {} }),
          route('oauth2', { name: 'oauth2', config: { enable_client_credentials: true } }),
          route('request-termination', { name: 'request-termination', config: { status_code: 403, message: 'Closed' } }),
          route('redirect', { name: 'redirect', config: { location: 'https://example.com/' } }),
          route('cors', { name: 'cors', config: { origins: ['https://app.example'] } }),
        ],
      },
    ],
    consumers: [{ username: 'bob', keyauth_credentials: [{ key: 'bob-key' }] }],
  }));

  const send = (host: string, options: { method?: string; headers?: Record<string, string>; body?: string; https?: boolean } = {}) =>
    request(`${options.https ? started.gw.https : started.gw.http}/request`, { method: options.method, body: options.body, headers: { host: `${host}.test`, ...options.headers } });

  /** kong.response.error: exactly the message and this request's id. */
  function assertError(res: Reply, status: number, message: string): void {
    assert.equal(res.status, status, res.text);
    assert.deepEqual(res.json(), { message, request_id: res.headers['x-kong-request-id'] });
  }

  /** kong.response.exit: exactly the body given. */
  function assertExit(res: Reply, status: number, body: string): void {
    assert.equal(res.status, status);
    assert.equal(res.text, body);
  }

  test('key-auth: kong.response.error', async () => {
    assertError(await send('key-auth'), 401, 'No API key found in request');
    assertError(await send('key-auth', { headers: { apikey: 'nope' } }), 401, 'Unauthorized');
  });

  test('basic-auth: kong.response.error', async () => {
    assertError(await send('basic-auth'), 401, 'Unauthorized');
  });

  test('acl: kong.response.error', async () => {
    assertError(await send('acl', { headers: { apikey: 'bob-key' } }), 403, 'You cannot consume this service');
  });

  test('ip-restriction: kong.response.error', async () => {
    assertError(await send('ip-restriction'), 403, 'IP address not allowed: 127.0.0.1');
  });

  test('rate-limiting: kong.response.error', async () => {
    assert.equal((await send('rate-limiting')).status, 200);
    assertError(await send('rate-limiting'), 429, 'API rate limit exceeded');
  });

  test('bot-detection: kong.response.error', async () => {
    assertError(await send('bot-detection', { headers: { 'user-agent': 'Googlebot/2.1' } }), 403, 'Forbidden');
  });

  test('request-size-limiting: kong.response.error', async () => {
    assertError(await send('request-size-limiting', { method: 'POST', body: 'ab' }), 413, 'Request size limit exceeded');
  });

  test('jwt: kong.response.exit, no request id', async () => {
    assertExit(await send('jwt'), 401, '{"message":"Unauthorized"}');
    assertExit(await send('jwt', { headers: { authorization: 'Bearer a.b.c' } }), 401, '{"message":"Bad token; invalid JSON"}');
  });

  test('oauth2: kong.response.exit, no request id', async () => {
    const res = await send('oauth2', { https: true });
    assert.equal(res.status, 401);
    assert.deepEqual(res.json(), { error: 'invalid_request', error_description: 'The access token is missing' });
  });

  test('request-termination: kong.response.exit, no request id', async () => {
    assertExit(await send('request-termination'), 403, '{"message":"Closed"}');
  });

  test('redirect: kong.response.exit, no request id', async () => {
    assertExit(await send('redirect'), 301, 'redirecting');
  });

  test("cors' preflight: kong.response.exit(200) without a body", async () => {
    const res = await send('cors', { method: 'OPTIONS', headers: { origin: 'https://app.example', 'access-control-request-method': 'GET' } });
    assertExit(res, 200, '');
  });
});
