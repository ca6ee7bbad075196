/**
 * Kong's rate-limiting schema catalogue (spec/03-plugins/23-rate-limiting/01-schema_spec.lua) through the
 * real loader, plus Tollgate's refusal of the redis policy with a message that says what to use instead.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pluginConfigErrors } from '../config-check.ts';

const check = (config: Record<string, unknown>) => pluginConfigErrors('rate-limiting', config);

test('proper config validates', async () => assert.deepEqual(await check({ second: 10 }), []));
test('proper config validates (bis)', async () => assert.deepEqual(await check({ second: 10, minute: 20, hour: 30, day: 40, month: 50, year: 60 }), []));
test('proper config validates (header)', async () => assert.deepEqual(await check({ second: 10, limit_by: 'header', header_name: 'X-App-Version' }), []));
test('proper config validates (path)', async () => assert.deepEqual(await check({ second: 10, limit_by: 'path', path: '/request' }), []));

test('limits: smaller unit is less than bigger unit', async () => {
  assert.deepEqual(await check({ second: 20, hour: 10 }), ['config: The limit for hour(10.0) cannot be lower than the limit for second(20.0)']);
});
test('limits: smaller unit is less than bigger unit (bis)', async () => {
  assert.deepEqual(await check({ second: 10, minute: 20, hour: 30, day: 40, month: 60, year: 50 }), ['config: The limit for year(50.0) cannot be lower than the limit for month(60.0)']);
});
test('invalid limit', async () => {
  assert.deepEqual(await check({}), ["config: at least one of these fields must be non-empty: 'config.second', 'config.minute', 'config.hour', 'config.day', 'config.month', 'config.year'"]);
});
test('limits must be greater than 0', async () => assert.deepEqual(await check({ second: 0 }), ['config.second: value must be greater than 0']));
test('is limited by header but the header_name field is missing', async () => {
  assert.deepEqual(await check({ second: 10, limit_by: 'header' }), ['config.header_name: required field missing']);
});
test('is limited by path but the path field is missing', async () => {
  assert.deepEqual(await check({ second: 10, limit_by: 'path' }), ['config.path: required field missing']);
});
test('sync_rate can only be used with the redis policy', async () => {
  assert.deepEqual(await check({ second: 10, sync_rate: 10 }), ['config: sync_rate can only be used with the redis policy']);
});
test('the redis settings of a Kong file are accepted as fields; the redis policy is refused with what to use instead', async () => {
  const errors = await check({ second: 10, policy: 'redis', redis: { host: 'localhost', port: 6379, database: 1, timeout: 2000, ssl: false } });
  assert.deepEqual(errors, ["config.policy: the 'redis' policy is not available in Tollgate: use 'local' (counters per node) or 'cluster' (counters in the gateway's shared store)"]);
  assert.deepEqual(await check({ second: 10, policy: 'local', redis: { host: 'localhost', port: 6379 } }), []);
});
test('unknown limit_by and policy values are refused', async () => {
  assert.deepEqual(await check({ second: 10, limit_by: 'cookie' }), ['config.limit_by: expected one of: consumer, credential, ip, service, header, path']);
  assert.deepEqual(await check({ second: 10, policy: 'memcached' }), ['config.policy: expected one of: local, cluster, redis']);
});

test("proper config validates with redis legacy structure (Kong's deprecated shorthands are accepted)", async () => {
  assert.deepEqual(await check({ second: 10, policy: 'local', redis_host: 'localhost', redis_port: 6379, redis_database: 0, redis_timeout: 2000, redis_ssl: false, redis_password: null }), []);
});
