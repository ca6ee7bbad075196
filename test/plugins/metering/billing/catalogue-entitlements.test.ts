/**
 * The catalogue's entitlement cases (E01–E11): metered limits (hard and soft) per usage period with
 * usage, balance and overage, usage counted from the subscription's start, the reset at each usage
 * period, boolean access, and both access endpoints (per customer, and the batch query an
 * enforcement point polls) with their reason codes and errors.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type TestGateway } from '../../../helpers/gateway.ts';
import { waitFor } from '../../../helpers/support.ts';
import { afterStart, anchorEndingIn, assertProblem, BillingApi, key, sleep, unitCard, startBillingGateway } from './support.ts';

let gateway: TestGateway;
let api: BillingApi;
before(async () => ({ gateway, api } = await startBillingGateway()));
after(() => gateway?.stop());

/** A customer subscribed to a plan with a metered entitlement on api_calls. */
async function metered(entitlement: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<{ customer: any; feature: any; subscription: any }> {
  const feature = await api.feature('api_calls');
  const plan = await api.activePlan([unitCard(feature.key, '1', { entitlement: { type: 'metered', ...entitlement } })]);
  const customer = await api.customer();
  const subscription = await api.subscribe(customer.key, plan.key, extra);
  return { customer, feature, subscription };
}

async function accessOf(customerKey: string, featureKey: string, until_: (e: any) => boolean = () => true): Promise<any> {
  return waitFor(async () => {
    const res = await api.ok(200, api.get(`/customers/${customerKey}/entitlement-access`));
    const entry = res.data.find((e: any) => e.feature_key === featureKey);
    return entry && until_(entry) ? entry : undefined;
  }, `access of ${customerKey}`, 20_000);
}

async function query(body: unknown, params = ''): Promise<any> {
  return api.ok(200, api.post(`/entitlement-access/query${params}`, body));
}

describe('entitlements', () => {
  test('E01 a hard limit of 100 used up: balance 0, has_access false, reason usage_limit_reached', async () => {
    const { customer, feature, subscription } = await metered({ limit: '100' });
    await afterStart(subscription);
    await api.usage(customer.key, 'request', 100, { route: '/a' });
    const entry = await accessOf(customer.key, feature.key, (e) => e.usage === '100');
    assert.deepEqual({ has_access: entry.has_access, balance: entry.balance, limit: entry.limit, overage: entry.overage }, { has_access: false, balance: '0', limit: '100', overage: '0' });
    const answer = await query({ customer: { keys: [customer.key] }, feature: { keys: [feature.key] } });
    assert.deepEqual(answer.data[0].features[feature.key].has_access, false);
    assert.equal(answer.data[0].features[feature.key].reason.code, 'usage_limit_reached');
  });

  test('E02 a soft limit of 100 with 150 used: access stays, overage 50', async () => {
    const { customer, feature, subscription } = await metered({ limit: '100', is_soft_limit: true });
    await afterStart(subscription);
    await api.usage(customer.key, 'request', 150, { route: '/a' });
    const entry = await accessOf(customer.key, feature.key, (e) => e.usage === '150');
    assert.equal(entry.has_access, true);
    assert.equal(entry.overage, '50');
    assert.equal(entry.balance, '0');
    assert.equal(entry.is_soft_limit, true);
  });

  test('E03 limit 100, one unit used: balance 99, usage 1, overage 0', async () => {
    const { customer, feature, subscription } = await metered({ limit: '100' });
    await afterStart(subscription);
    await api.usage(customer.key, 'request', 1, { route: '/a' });
    const entry = await accessOf(customer.key, feature.key, (e) => e.usage === '1');
    assert.deepEqual([entry.balance, entry.usage, entry.overage, entry.has_access], ['99', '1', '0', true]);
    assert.deepEqual(entry.period, subscription.current_period);
  });

  test('E04 usage before the subscription started does not count: 100 units a minute before → usage 0', async () => {
    const feature = await api.feature('api_calls');
    const plan = await api.activePlan([unitCard(feature.key, '1', { entitlement: { type: 'metered', limit: '100' } })]);
    const customer = await api.customer();
    await api.usage(customer.key, 'request', 100, { route: '/a' }, new Date(Date.now() - 60_000).toISOString());
    await api.subscribe(customer.key, plan.key);
    const entry = await accessOf(customer.key, feature.key);
    assert.equal(entry.usage, '0');
    assert.equal(entry.has_access, true);
  });

  test('E05 at the next usage period usage is 0 and the balance the whole limit again', async () => {
    const { customer, feature, subscription } = await metered({ limit: '5' }, { billing_anchor: anchorEndingIn(6_000) });
    await afterStart(subscription);
    await api.usage(customer.key, 'request', 5, { route: '/a' });
    const used = await accessOf(customer.key, feature.key, (e) => e.usage === '5');
    assert.equal(used.has_access, false);
    await sleep(Math.max(0, Date.parse(used.period.to) - Date.now() + 50));
    const reset = await accessOf(customer.key, feature.key, (e) => e.period.from !== used.period.from);
    assert.deepEqual([reset.usage, reset.balance, reset.has_access], ['0', '5', true]);
    assert.equal(reset.period.from, used.period.to);
  });

  test('E06 Tollgate has no entitlement CRUD: a second entitlement for (customer, feature) would need a second subscription, which is 409', async () => {
    const { customer, feature } = await metered({ limit: '5' });
    const plan = await api.activePlan([unitCard((await api.feature('api_calls')).key, '1')]);
    assertProblem(await api.post('/subscriptions', { customer: { key: customer.key }, plan: { key: plan.key } }), 409);
    assertProblem(await api.post('/entitlements', { customer: customer.key, feature: feature.key }), 404);
  });

  test('E07 a live feature the customer lacks: feature_unavailable; an unknown key: feature_not_found', async () => {
    const { customer } = await metered({ limit: '5' });
    const other = await api.feature('api_calls');
    const answer = await query({ customer: { keys: [customer.key] }, feature: { keys: [other.key, 'nope'] } });
    assert.equal(answer.data[0].features[other.key].reason.code, 'feature_unavailable');
    assert.equal(answer.data[0].features.nope.reason.code, 'feature_not_found');
    assert.equal(answer.data[0].features.nope.has_access, false);
  });

  test('E08 keys [customer key, its subject, "ghost"]: one entry matched by both, error customer_not_found for ghost', async () => {
    const subject = key('subj');
    const feature = await api.feature('api_calls');
    const plan = await api.activePlan([unitCard(feature.key, '1', { entitlement: { type: 'metered', limit: '5' } })]);
    const customer = await api.customer({ usage_attribution: { subject_keys: [subject] } });
    await api.subscribe(customer.key, plan.key);
    const ghost = key('ghost');
    const answer = await query({ customer: { keys: [customer.key, subject, ghost] } });
    assert.equal(answer.data.length, 1);
    assert.deepEqual(answer.data[0].matched, [customer.key, subject]);
    assert.equal(answer.data[0].customer.id, customer.id);
    assert.equal(answer.data[0].features[feature.key].has_access, true);
    assert.ok(answer.data[0].updated_at);
    assert.deepEqual(answer.errors.map((e: any) => [e.code, e.customer]), [['customer_not_found', ghost]]);
    // Without a feature filter every live feature is evaluated.
    const other = await api.feature(null);
    const all = await query({ customer: { keys: [customer.key] } });
    assert.equal(all.data[0].features[other.key].reason.code, 'feature_unavailable');
  });

  test('E09 page[size]=101 on the query: 400 "between 1 and 100"', async () => {
    const res = await api.post('/entitlement-access/query?page[size]=101', { customer: { keys: ['x'] } });
    assertProblem(res, 400, 'page[size]');
    assert.match(res.text, /between 1 and 100/);
    assertProblem(await api.post('/entitlement-access/query', { customer: { keys: [] } }), 400, 'customer.keys');
  });

  test('E10 entitlement access of a deleted customer: 412; of an unknown one: 404', async () => {
    const customer = await api.customer();
    await api.ok(204, api.del(`/customers/${customer.key}`));
    assertProblem(await api.get(`/customers/${customer.id}/entitlement-access`), 412);
    assertProblem(await api.get(`/customers/${key('nobody')}/entitlement-access`), 404);
  });

  test('E11 a free rate card with a metered limit of 5, a boolean and a static one: all listed with access, sorted by feature key', async () => {
    const meteredFeature = await api.feature('api_calls', { key: key('b_metered') });
    const flag = await api.feature(null, { key: key('a_flag') });
    const tier = await api.feature(null, { key: key('c_static') });
    const plan = await api.activePlan([
      { key: meteredFeature.key, name: 'Calls', feature_key: meteredFeature.key, price: { type: 'free' }, billing_cadence: 'PT1M', entitlement: { type: 'metered', limit: '5' } },
      { key: flag.key, name: 'Flag', feature_key: flag.key, price: { type: 'free' }, entitlement: { type: 'boolean' } },
      { key: tier.key, name: 'Tier', feature_key: tier.key, price: { type: 'free' }, entitlement: { type: 'static', config: { seats: 5 } } },
    ]);
    const customer = await api.customer();
    await api.subscribe(customer.key, plan.key);
    const access = await api.ok(200, api.get(`/customers/${customer.key}/entitlement-access`));
    assert.deepEqual(access.data.map((e: any) => [e.feature_key, e.type, e.has_access]), [
      [flag.key, 'boolean', true],
      [meteredFeature.key, 'metered', true],
      [tier.key, 'static', true],
    ]);
    assert.equal(access.data[2].config, '{"seats":5}');
  });

  test('a feature filter on a dimension counts only matching usage', async () => {
    const feature = await api.feature('api_calls', { meter: { key: 'api_calls', filters: { route: { in: ['/orders', '/carts'] } } } });
    const plan = await api.activePlan([unitCard(feature.key, '1', { entitlement: { type: 'metered', limit: '10' } })]);
    const customer = await api.customer();
    const s = await api.subscribe(customer.key, plan.key);
    await afterStart(s);
    await api.usage(customer.key, 'request', 2, { route: '/orders' });
    await api.usage(customer.key, 'request', 1, { route: '/carts' });
    await api.usage(customer.key, 'request', 4, { route: '/other' });
    assert.equal((await accessOf(customer.key, feature.key, (e) => e.usage === '3')).usage, '3');
  });
});
