/** Kong's proxy-cache schema catalogue (spec/03-plugins/31-proxy-cache/01-schema_spec.lua) through the real loader. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pluginConfigErrors } from '../config-check.ts';

const check = (config: Record<string, unknown>) => pluginConfigErrors('proxy-cache', { strategy: 'memory', ...config });

test('accepts a minimal config', async () => assert.deepEqual(await check({}), []));
test('accepts custom values', async () => assert.deepEqual(await check({ response_code: [200, 301], request_method: ['GET'], content_type: ['application/json'] }), []));
test('accepts vary_query_params and vary_headers', async () => assert.deepEqual(await check({ vary_query_params: ['foo'], vary_headers: ['foo'] }), []));
test('accepts wildcard content types and parameters', async () => {
  assert.deepEqual(await check({ content_type: ['application/*', '*/text'] }), []);
  assert.deepEqual(await check({ content_type: ['*/*'] }), []);
  assert.deepEqual(await check({ content_type: ['application/json; charset=UTF-8'] }), []);
});
test("accepts Kong's memory dictionary", async () => assert.deepEqual(await check({ memory: { dictionary_name: 'kong' } }), []));
test('requires a strategy', async () => assert.deepEqual(await pluginConfigErrors('proxy-cache', {}), ['config.strategy: required field missing']));
test('refuses an unknown strategy', async () => assert.deepEqual(await check({ strategy: 'redis' }), ['config.strategy: expected one of: memory']));
test('errors with an invalid response_code', async () => assert.deepEqual(await check({ response_code: [99] }), ['config.response_code[0]: value should be between 100 and 900']));
test('errors if response_code is an empty array', async () => assert.deepEqual(await check({ response_code: [] }), ['config.response_code: length must be at least 1']));
test('errors if response_code is a string', async () => assert.deepEqual(await check({ response_code: '' }), ['config.response_code: expected an array']));
test('errors if response_code has non-numeric values', async () => {
  assert.deepEqual(await check({ response_code: [true, 'alo', 123] }), ['config.response_code[0]: expected an integer', 'config.response_code[1]: expected an integer']);
});
test('errors if response_code has a float value', async () => assert.deepEqual(await check({ response_code: [123.5] }), ['config.response_code[0]: expected an integer']));
test('errors with an invalid ttl', async () => assert.deepEqual(await check({ cache_ttl: -1 }), ['config.cache_ttl: value must be greater than 0']));
