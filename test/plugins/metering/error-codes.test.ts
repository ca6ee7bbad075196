/**
 * Every problem+json answer of the metering route carries its catalogue code (`code`, an RFC 7807
 * extension member) beside the members it always had — metering's (v3 and OpenMeter v1 paths) and
 * billing's own, which used to be lost behind a code per status (docs/errors.md).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { type TestGateway } from '../../helpers/gateway.ts';
import { assertProblem, BillingApi, startBillingGateway } from './billing/support.ts';

let gateway: TestGateway;
let api: BillingApi;
before(async () => ({ gateway, api } = await startBillingGateway()));
after(() => gateway?.stop());

test('an unknown meter: 404 Not Found with METERING_ERR_METER_NOT_FOUND, on v3 and v1 paths', async () => {
  const v3 = assertProblem(await api.getMeter('no_such_meter'), 404);
  assert.deepEqual([v3.type, v3.title, v3.detail, v3.code], [
    'https://kongapi.info/konnect/not-found', 'Not Found', 'not found error: meter not found: no_such_meter', 'METERING_ERR_METER_NOT_FOUND',
  ]);
  const v1 = await api.get('/api/v1/meters/no_such_meter');
  assert.equal(v1.status, 404);
  assert.deepEqual([v1.json().type, v1.json().code], ['about:blank', 'METERING_ERR_METER_NOT_FOUND']);
});

test('a method the resource does not take: 405 with Allow and METERING_ERR_METHOD_NOT_ALLOWED', async () => {
  const res = await api.send('DELETE', '/events');
  assert.equal(assertProblem(res, 405).code, 'METERING_ERR_METHOD_NOT_ALLOWED');
  assert.equal(res.headers.allow, 'GET, POST');
});

test('an invalid event: 400 with METERING_ERR_INVALID_EVENT and its invalid parameters', async () => {
  const problem = assertProblem(await api.ingest({ specversion: '1.0', id: 'e1', source: 'test' }), 400, 'type');
  assert.equal(problem.code, 'METERING_ERR_INVALID_EVENT');
});

test('billing keeps its own codes: BILLING_ERR_GONE (410) and BILLING_ERR_VALIDATION (400)', async () => {
  const customer = await api.customer();
  await api.ok(204, api.del(`/customers/${customer.id}`));
  const gone = assertProblem(await api.put(`/customers/${customer.id}`, { name: 'Renamed' }), 410);
  assert.deepEqual([gone.type, gone.title, gone.code], ['https://kongapi.info/konnect/error', 'Error', 'BILLING_ERR_GONE']);
  assert.equal(assertProblem(await api.post('/customers', {}), 400, 'key').code, 'BILLING_ERR_VALIDATION');
});
