/**
 * Kong's redirect catalogue (spec/03-plugins/45-redirect/01-schema_spec.lua, 02-access_spec.lua,
 * 03-integration_spec.lua) against a real gateway: the default and a custom status, the location as
 * configured or with the request's path and query, on a consumer behind key-auth, and the schema's
 * messages. Nothing reaches the upstream.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { gatewayOnEchoUpstreamAroundTests, request } from '../../helpers/gateway.ts';
import { pluginConfigErrors } from '../config-check.ts';

const redirect = (config: Record<string, unknown>) => [{ name: 'redirect', config }];

describe('redirect (access)', () => {
  const started = gatewayOnEchoUpstreamAroundTests((url) => ({
    services: [
      {
        name: 'mock',
        url,
        routes: [
          { name: 'api1', hosts: ['api1.redirect.test'], plugins: redirect({ location: 'https://example.com' }) },
          { name: 'api2', hosts: ['api2.redirect.test'], plugins: redirect({ status_code: 302, location: 'https://example.com' }) },
          { name: 'api3', hosts: ['api3.redirect.test'], plugins: redirect({ location: 'https://example.com/path?foo=bar' }) },
          { name: 'api4', hosts: ['api4.redirect.test'], plugins: redirect({ location: 'https://example.com/some_path?foo=bar', keep_incoming_path: true }) },
          { name: 'keyed', hosts: ['keyed.redirect.test'], plugins: [{ name: 'key-auth', config: {} }] },
        ],
      },
    ],
    consumers: [{ username: 'bob', keyauth_credentials: [{ key: 'kong' }], plugins: redirect({ location: 'https://example.com/path?foo=bar' }) }],
  }));

  const get = (host: string, path = '/status/200', headers: Record<string, string> = {}) => request(started.gw.http + path, { headers: { host, ...headers } });

  test('default status code', async () => {
    const res = await get('api1.redirect.test');
    assert.equal(res.status, 301);
    assert.equal(res.headers.location, 'https://example.com');
    assert.equal(res.text, 'redirecting');
    assert.equal(started.upstream.requests.length, 0);
  });

  test('custom status code', async () => {
    assert.equal((await get('api2.redirect.test')).status, 302);
  });

  test('supports path and query params in location', async () => {
    assert.equal((await get('api3.redirect.test')).headers.location, 'https://example.com/path?foo=bar');
  });

  test('keeps the incoming path and query', async () => {
    assert.equal((await get('api4.redirect.test', '/status/200?keep=this')).headers.location, 'https://example.com/status/200?keep=this');
    assert.equal((await get('api4.redirect.test', '/no-query')).headers.location, 'https://example.com/no-query', 'no query: the location loses its own');
  });

  test('can be applied on a consumer', async () => {
    assert.equal((await get('keyed.redirect.test', '/request')).status, 401);
    const res = await get('keyed.redirect.test', '/request', { apikey: 'kong' });
    assert.equal(res.status, 301);
    assert.equal(res.headers.location, 'https://example.com/path?foo=bar');
  });
});

describe('redirect (schema)', () => {
  const errors = (config: Record<string, unknown>) => pluginConfigErrors('redirect', config);

  test('accepts a valid status_code and location', async () => {
    assert.deepEqual(await errors({ status_code: 404, location: 'https://example.com' }), []);
    assert.deepEqual(await errors({ location: 'https://example.com' }), []);
  });

  test('refuses what Kong refuses, with its messages', async () => {
    assert.deepEqual(await errors({ status_code: 'abcd', location: 'https://example.com' }), ['config.status_code: expected an integer']);
    assert.deepEqual(await errors({ status_code: null, location: 'https://example.com' }), ['config.status_code: required field missing']);
    assert.deepEqual(await errors({ status_code: 600, location: 'https://example.com' }), ['config.status_code: value should be between 200 and 599']);
    assert.deepEqual(await errors({ status_code: 301 }), ['config.location: required field missing']);
    assert.deepEqual(await errors({ status_code: 301, location: 'definitely_not_a_url' }), ['config.location: missing host in url']);
    assert.deepEqual(await errors({ location: '//example.com/x' }), ['config.location: missing scheme in url']);
    assert.deepEqual(await errors({ location: 'https://example.com', keep_incoming_path: 'invalid' }), ['config.keep_incoming_path: expected a boolean']);
  });
});
