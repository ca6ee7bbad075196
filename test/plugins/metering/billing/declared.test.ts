/**
 * Customers, features and plans declared in gateway.yaml: validated with the API's messages (reported
 * as FILE:LINE:COL by the loader), synced into the store at start and on reload (a declared plan is
 * published as declared; a changed one becomes a new version and subscribers keep theirs; removed
 * entities are archived or deleted), and read-only through the API (405).
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { loadConfigFile } from '../../../../src/config/load.ts';
import { bundledPlugins } from '../../../../src/plugins.ts';
import { startGateway, tempDir, type TestGateway } from '../../../helpers/gateway.ts';
import { waitFor } from '../../../helpers/support.ts';
import { assertProblem, BillingApi, billingConfig, planBody, sleep } from './support.ts';

function declared(price: string, withExtras = true): Record<string, any> {
  return billingConfig({
    extra: {
      customers: [{ key: 'declared-acme', name: 'Declared Acme', usage_attribution: { subject_keys: ['declared-acme-app'] }, currency: 'USD' }, ...(withExtras ? [{ key: 'declared-temp', name: 'Temporary' }] : [])],
      features: [{ key: 'declared_calls', name: 'Declared calls', meter: { key: 'api_calls', filters: { route: { eq: '/orders' } } } }, ...(withExtras ? [{ key: 'declared_flag', name: 'Flag' }] : [])],
      plans: [planBody('declared_pro', [{ key: 'declared_calls', name: 'Calls', feature_key: 'declared_calls', price: { type: 'unit', amount: price }, entitlement: { type: 'metered', limit: '1000' } }])],
    },
  });
}

let gateway: TestGateway;
let api: BillingApi;

before(async () => {
  gateway = await startGateway(declared('0.01'));
  api = await BillingApi.connect(gateway.https);
});
after(() => gateway?.stop());

describe('gateway.yaml customers, features and plans', () => {
  test('declared entities are in the store at start; the plan is published', async () => {
    const customer = await api.ok(200, api.get('/customers/declared-acme'));
    assert.deepEqual(customer.usage_attribution.subject_keys, ['declared-acme-app']);
    const feature = await api.ok(200, api.get('/features/declared_calls'));
    assert.deepEqual(feature.meter.filters, { route: { eq: '/orders' } });
    const plans = await api.ok(200, api.get('/plans?key=declared_pro'));
    assert.equal(plans.data.length, 1);
    assert.equal(plans.data[0].status, 'active');
    assert.equal(plans.data[0].version, 1);
  });

  test('the API refuses to change declared entities: 405', async () => {
    assertProblem(await api.put('/customers/declared-acme', { name: 'Renamed' }), 405);
    assertProblem(await api.del('/customers/declared-acme'), 405);
    assertProblem(await api.del('/features/declared_flag'), 405);
    const [plan] = (await api.ok(200, api.get('/plans?key=declared_pro'))).data;
    assertProblem(await api.post(`/plans/${plan.id}/archive`), 405);
    // A new version through the API is another plan of the same key: allowed, it is the API's own.
    await api.ok(201, api.post('/plans', planBody('api_made_plan', [{ key: 'base', name: 'Base', price: { type: 'flat', amount: '1' } }])));
  });

  test('on reload: a changed plan is published as v2 (a subscriber keeps v1), removed entities are archived or deleted', async () => {
    const subscription = await api.subscribe('declared-acme', 'declared_pro');
    assert.equal(subscription.plan.version, 1);
    assert.equal(await gateway.reload(declared('0.02', false)), true);
    const plans = await waitFor(async () => {
      const list = (await api.ok(200, api.get('/plans?key=declared_pro'))).data;
      return list.length === 2 ? list : undefined;
    }, 'v2', 20_000);
    assert.deepEqual(plans.map((p: any) => [p.version, p.status]), [[1, 'archived'], [2, 'active']]);
    assert.equal(plans[1].phases[0].rate_cards[0].price.amount, '0.02');
    assert.equal((await api.ok(200, api.get(`/subscriptions/${subscription.id}`))).plan.version, 1);
    assertProblem(await api.get('/features/declared_flag'), 404);
    assertProblem(await api.get('/customers/declared-temp'), 404);
    // Reloading the same file again changes nothing.
    assert.equal(await gateway.reload(declared('0.02', false)), true);
    await sleep(100);
    assert.equal((await api.ok(200, api.get('/plans?key=declared_pro'))).data.length, 2);
  });

  test('declared entities get the API\'s validation messages, with their position in the file', async () => {
    const config = billingConfig({
      extra: {
        customers: [{ key: 'gold', name: 'Gold', currency: 'XAU' }],
        features: [{ key: 'Bad Key', name: 'Bad' }],
        plans: [planBody('bad_plan', [{ key: 'base', name: 'Base', price: { type: 'flat', amount: '-1' } }], { currency: 'ZZZZ', billing_cadence: 'PT30S' })],
      },
    });
    const file = join(tempDir(), 'gateway.yaml');
    writeFileSync(file, stringify({ ...config, gateway: { data_dir: tempDir() } }));
    const result = await loadConfigFile(file, bundledPlugins);
    assert.equal(result.ok, false);
    const errors = result.ok ? [] : result.errors.map(String);
    const expect = (pattern: RegExp) => assert.ok(errors.some((e) => pattern.test(e)), `${pattern} in:\n${errors.join('\n')}`);
    expect(/gateway\.yaml:\d+:\d+: customers\[0\]\.currency: customer currency "XAU" must be fiat/);
    expect(/gateway\.yaml:\d+:\d+: features\[0\]\.key: must match pattern/);
    expect(/gateway\.yaml:\d+:\d+: plans\[0\]\.currency: currency not found: ZZZZ/);
    expect(/plans\[0\]\.billing_cadence: invalid billing_cadence: PT30S/);
    expect(/plans\[0\]\.phases\[0\]\.rate_cards\[0\]\.price\.amount: must not be negative/);
  });
});
