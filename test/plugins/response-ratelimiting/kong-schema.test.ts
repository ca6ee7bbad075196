/** Kong's response-ratelimiting schema catalogue (spec/03-plugins/24-response-rate-limiting/01-schema_spec.lua) through the real loader. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pluginConfigErrors } from '../config-check.ts';

const check = (config: Record<string, unknown>) => pluginConfigErrors('response-ratelimiting', config);

test('proper config validates', async () => assert.deepEqual(await check({ limits: { video: { second: 1 } } }), []));
test('proper config validates (bis)', async () => {
  assert.deepEqual(await check({ limits: { video: { second: 1, minute: 2, hour: 3, day: 4, month: 5, year: 6 } } }), []);
});
test('empty config', async () => {
  assert.deepEqual(await check({}), ['config.limits: required field missing']);
  assert.deepEqual(await check({ limits: {} }), ['config.limits: length must be at least 1']);
});
test('invalid limit', async () => assert.deepEqual(await check({ limits: { video: { seco: 1 } } }), [
  "config.limits.video.seco: unknown field; did you mean 'second'?",
  "config.limits.video: at least one of these fields must be non-empty: 'second', 'minute', 'hour', 'day', 'month', 'year'",
]));
test("a null limit is no limit (Kong's issue #8314)", async () => assert.deepEqual(await check({ limits: { video: { second: null, minute: 1 } } }), []));
test('a usage needs at least one period', async () => {
  assert.deepEqual(await check({ limits: { video: {} } }), [
    "config.limits.video: at least one of these fields must be non-empty: 'second', 'minute', 'hour', 'day', 'month', 'year'",
  ]);
});
test('limits: smaller unit is less than bigger unit', async () => {
  assert.deepEqual(await check({ limits: { video: { second: 2, minute: 1 } } }), ['config.limits: the limit for minute(1.0) cannot be lower than the limit for second(2.0)']);
});
test('limits: smaller unit is less than bigger unit (bis)', async () => {
  assert.deepEqual(await check({ limits: { video: { second: 1, minute: 2, hour: 3, day: 4, month: 6, year: 5 } } }), [
    'config.limits: the limit for year(5.0) cannot be lower than the limit for month(6.0)',
  ]);
});
test('invalid unit type', async () => assert.deepEqual(await check({ limits: { second: 10 } }), ['config.limits.second: expected a record']));
test("Kong's legacy redis fields load", async () => {
  assert.deepEqual(await check({ limits: { video: { second: 10 } }, redis_host: 'localhost', redis_port: 6379, redis_timeout: 1100, redis_database: 0 }), []);
});
test('the redis policy is refused with what to use instead', async () => {
  assert.deepEqual(await check({ limits: { video: { second: 10 } }, policy: 'redis', redis: { host: 'localhost' } }), [
    "config.policy: the 'redis' policy is not available in Tollgate: use 'local' (counters per node) or 'cluster' (counters in the gateway's shared store)",
  ]);
});
test('a usage name must fit in a header name', async () => {
  assert.deepEqual(await check({ limits: { 'video clips': { second: 1 } } }), [
    "config.limits.video clips: bad header name 'video clips', allowed characters are A-Z, a-z, 0-9, '_', and '-'",
  ]);
});
