/**
 * Billing edge cases found by an independent billing catalogue and by hand (issue 27, item 7): the
 * regression tests, against a real gateway, of what main got wrong, beside neighbouring cases the fixes
 * must leave as they were. (gateway.yaml's entities applied once by one of several processes:
 * cluster-declared.test.ts.)
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
import { anchorEndingIn, assertProblem, BillingApi, billingConfig, flatCard, key, planBody, sleep, startBillingGateway, unitCard } from './support.ts';

let gateway: TestGateway;
let api: BillingApi;
before(async () => ({ gateway, api } = await startBillingGateway()));
after(() => gateway?.stop());

const WHOLE_SECOND = /T\d{2}:\d{2}:\d{2}Z$/;

const linesOf = (invoice: any) => invoice.lines.map((l: any) => [l.rate_card_key, l.amount]);

describe('rate card cadences', () => {
  test('a flat card without billing_cadence is a one-time fee (as OpenMeter reads it): billed whole in the first period only', async () => {
    const plan = await api.activePlan([{ key: 'setup', name: 'Setup', price: { type: 'flat', amount: '25' } }, flatCard('base', '6')]);
    assert.equal(plan.phases[0].rate_cards[0].billing_cadence, null);
    const customer = await api.customer();
    await api.subscribe(customer.key, plan.key, { billing_anchor: anchorEndingIn(2_000) });
    const [first, second] = await api.invoicesWhen(customer.key, 2);
    assert.deepEqual(first.lines.map((l: any) => l.rate_card_key), ['setup', 'base']);
    assert.equal(first.lines[0].amount, '25', 'a one-time fee is never prorated');
    assert.deepEqual(linesOf(second), [['base', '6']]);
  });

  test('a usage card without billing_cadence bills at the plan\'s cadence; with billing_cadence: null it is refused', async () => {
    const calls = await api.feature('api_calls');
    const plan = await api.activePlan([unitCard(calls.key, '1')]);
    assert.equal(plan.phases[0].rate_cards[0].billing_cadence, 'PT1M');
    const res = await api.post('/plans', planBody(key('once'), [unitCard(calls.key, '1', { billing_cadence: null })]));
    const problem = assertProblem(res, 400, 'billing_cadence');
    assert.ok(problem.invalid_parameters.some((p: any) => p.code === 'rate_card_usage_based_requires_billing_cadence'), res.text);
  });
});

describe('invoices', () => {
  test('a period with nothing used and nothing owed issues no invoice; the next period\'s usage is invoiced', async () => {
    const calls = await api.feature('api_calls');
    const plan = await api.activePlan([unitCard(calls.key, '0.5')]);
    const customer = await api.customer();
    const subscription = await api.subscribe(customer.key, plan.key, { billing_anchor: anchorEndingIn(1_500) });
    const secondFrom = subscription.current_period.to;
    // A second into the second period, whatever the boundaries' milliseconds; the cancel comes a second later.
    const inSecond = new Date(Date.parse(secondFrom) + 1_000).toISOString();
    await sleep(Date.parse(secondFrom) + 2_100 - Date.now());
    await api.usage(customer.key, 'request', 2, { route: '/a' }, inSecond);
    await api.ok(200, api.post(`/subscriptions/${subscription.id}/cancel`, { timing: 'immediate' }));
    // A subscription's periods are issued in order: once the second one's invoice is out, the first was decided.
    const [invoice] = await api.invoicesWhen(customer.key, 1);
    assert.equal(invoice.period.from, secondFrom);
    assert.deepEqual(invoice.lines.map((l: any) => [l.quantity, l.amount]), [['2', '1']]);
    assert.equal((await api.invoices(customer.key)).length, 1);
  });

  test('invoices are listed in number order (the next period\'s in-advance invoice before the last period\'s in-arrears one), page after page', async () => {
    const plan = await api.activePlan([flatCard('base', '1'), flatCard('late', '2', 'in_arrears')]);
    const customer = await api.customer();
    await api.subscribe(customer.key, plan.key, { billing_anchor: anchorEndingIn(1_500) });
    const invoices = await api.invoicesWhen(customer.key, 3);
    assert.deepEqual(invoices.map((i: any) => i.lines[0].payment_term), ['in_advance', 'in_advance', 'in_arrears']);
    const numbers = invoices.map((i: any) => i.number);
    assert.deepEqual(numbers, [...numbers].sort());
    const paged: any[] = [];
    for (let page = 1; page <= 3; page++) paged.push(...(await api.ok(200, api.get(`/invoices?customer=${customer.key}&page[size]=1&page[number]=${page}`))).data);
    assert.deepEqual(paged.map((i) => i.number), numbers);
    const everyone = (await api.ok(200, api.get('/invoices?page[size]=1000'))).data.map((i: any) => Number(i.number.slice('INV-'.length)));
    assert.deepEqual(everyone, [...everyone].sort((a, b) => a - b));
  });
});

describe('customers', () => {
  test('a customer\'s currency cannot change while a subscription in another currency is live: 400 currency_mismatch', async () => {
    const plan = await api.activePlan([flatCard('base', '5')]);
    const customer = await api.customer({ currency: 'USD' });
    const subscription = await api.subscribe(customer.key, plan.key);
    const res = await api.put(`/customers/${customer.key}`, { name: customer.name, currency: 'EUR' });
    const problem = assertProblem(res, 400, 'currency');
    assert.ok(problem.invalid_parameters.some((p: any) => p.code === 'currency_mismatch'), res.text);
    assert.match(problem.detail, new RegExp(`currency mismatch: customer currency would be EUR, but subscription ${subscription.id} invoices in USD`));
    assert.equal((await api.ok(200, api.get(`/customers/${customer.key}`))).currency, 'USD');
    // Other changes are fine, with the same currency or without one.
    await api.ok(200, api.put(`/customers/${customer.key}`, { name: 'Renamed', currency: 'USD' }));
    await api.ok(200, api.put(`/customers/${customer.key}`, { name: 'Renamed again' }));

    // A customer without a currency may take the one of its subscription, and no other.
    const bare = await api.customer();
    await api.subscribe(bare.key, plan.key);
    assertProblem(await api.put(`/customers/${bare.key}`, { name: bare.name, currency: 'EUR' }), 400, 'currency');
    assert.equal((await api.ok(200, api.put(`/customers/${bare.key}`, { name: bare.name, currency: 'USD' }))).currency, 'USD');

    // Once the subscription has ended, the currency is free.
    await api.ok(200, api.post(`/subscriptions/${subscription.id}/cancel`, { timing: 'immediate' }));
    assert.equal((await api.ok(200, api.put(`/customers/${customer.key}`, { name: 'Renamed', currency: 'EUR' }))).currency, 'EUR');
  });

  test('a subscription to a plan of free cards invoices nothing: the customer\'s currency may change', async () => {
    const flag = await api.feature(null);
    const free = await api.activePlan([{ key: flag.key, name: 'Flag', feature_key: flag.key, price: { type: 'free' }, entitlement: { type: 'boolean' } }]);
    const customer = await api.customer({ currency: 'USD' });
    await api.subscribe(customer.key, free.key);
    assert.equal((await api.ok(200, api.put(`/customers/${customer.key}`, { name: customer.name, currency: 'EUR' }))).currency, 'EUR');
  });
});

describe('entitlement limits given as numbers', () => {
  /** A plan body with a metered entitlement whose limit is `limitJson`, as JSON text. */
  const planText = (featureKey: string, limitJson: string) =>
    JSON.stringify(planBody(key('numeric'), [unitCard(featureKey, '1', { entitlement: { type: 'metered', limit: '@limit' } })])).replace('"@limit"', limitJson);
  const postPlan = (text: string) => api.send('POST', '/plans', text, { 'content-type': 'application/json' });

  test('a JSON number is read exactly from its text (as OpenMeter\'s v3 API types the limit); a decimal string still works', async () => {
    const calls = await api.feature('api_calls');
    const cases: [string, string][] = [['5', '5'], ['0.1', '0.1'], ['12345678901234567890.5', '12345678901234567890.5'], ['1e3', '1000'], ['2.50', '2.5'], ['"7.25"', '7.25']];
    for (const [sent, read] of cases) {
      const res = await postPlan(planText(calls.key, sent));
      assert.equal(res.status, 201, `${sent}: ${res.text}`);
      assert.equal(res.json().phases[0].rate_cards[0].entitlement.limit, read, sent);
    }
    assertProblem(await postPlan(planText(calls.key, '-1')), 400, 'limit');
    assertProblem(await postPlan(planText(calls.key, '1e50')), 400, 'limit');
    // Price amounts are decimal strings in OpenMeter's API: a number is refused there.
    assertProblem(await postPlan(planText(calls.key, '5').replace('"amount":"1"', '"amount":1')), 400, 'amount');
  });

  test('a subscriber sees the exact limit in its entitlement access', async () => {
    const calls = await api.feature('api_calls');
    const draft = (await postPlan(planText(calls.key, '12345678901234567890.5'))).json();
    const plan = await api.ok(200, api.post(`/plans/${draft.id}/publish`));
    const customer = await api.customer();
    await api.subscribe(customer.key, plan.key);
    const [access] = (await api.ok(200, api.get(`/customers/${customer.key}/entitlement-access`))).data;
    assert.equal(access.limit, '12345678901234567890.5');
    assert.equal(access.balance, '12345678901234567890.5');
  });

  test('gateway.yaml: a limit may be a number; one of more significant digits than a double keeps is refused with its position', async () => {
    const declaring = (limit: number) =>
      billingConfig({
        extra: {
          features: [{ key: 'yaml_calls', name: 'Calls', meter: { key: 'api_calls' } }],
          plans: [planBody('yaml_numbers', [unitCard('yaml_calls', '1', { entitlement: { type: 'metered', limit } })])],
        },
      });
    const file = join(tempDir(), 'gateway.yaml');
    writeFileSync(file, stringify({ ...declaring(0.12345678901234566), gateway: { data_dir: tempDir() } }));
    const result = await loadConfigFile(file, bundledPlugins);
    const errors = result.ok ? [] : result.errors.map(String);
    assert.ok(errors.some((e) => /gateway\.yaml:\d+:\d+: plans\[0\]\.phases\[0\]\.rate_cards\[0\]\.entitlement\.limit: a number of more than 15 significant digits/.test(e)), errors.join('\n'));

    const declared = await startGateway(declaring(0.1));
    try {
      const yamlApi = await BillingApi.connect(declared.https);
      const [plan] = (await yamlApi.ok(200, yamlApi.get('/plans?key=yaml_numbers'))).data;
      assert.equal(plan.phases[0].rate_cards[0].entitlement.limit, '0.1');
    } finally {
      await declared.stop();
    }
  });
});

describe('subscription instants', () => {
  test('active_from, billing_anchor, periods and active_to are whole seconds (truncated down) in every answer', async () => {
    const calls = await api.feature('api_calls');
    const plan = await api.activePlan([unitCard(calls.key, '1', { entitlement: { type: 'metered', limit: '10' } })]);
    const customer = await api.customer();
    const subscription = await api.subscribe(customer.key, plan.key, { billing_anchor: '2025-01-01T00:00:00.740Z' });
    assert.equal(subscription.billing_anchor, '2025-01-01T00:00:00Z');
    for (const instant of [subscription.active_from, subscription.current_period.from, subscription.current_period.to]) assert.match(instant, WHOLE_SECOND);
    assert.deepEqual(await api.ok(200, api.get(`/subscriptions/${subscription.id}`)), subscription);

    const [access] = (await api.ok(200, api.get(`/customers/${customer.key}/entitlement-access`))).data;
    assert.equal(access.period.from, subscription.active_from);
    assert.deepEqual((await api.ok(200, api.get(`/customers/${customer.key}/upcoming-invoice`))).period, subscription.current_period);

    const ended = await api.ok(200, api.post(`/subscriptions/${subscription.id}/cancel`, { timing: 'immediate' }));
    assert.match(ended.active_to, WHOLE_SECOND);

    const other = await api.customer();
    const unanchored = await api.subscribe(other.key, plan.key);
    assert.match(unanchored.active_from, WHOLE_SECOND);
    assert.equal(unanchored.billing_anchor, unanchored.active_from);
  });

  test('an event stamped with the subscription\'s first second counts (the walk-through of docs/billing.md)', async () => {
    const calls = await api.feature('api_calls');
    const plan = await api.activePlan([unitCard(calls.key, '1', { entitlement: { type: 'metered', limit: '10' } })]);
    const customer = await api.customer();
    const subscription = await api.subscribe(customer.key, plan.key);
    await api.usage(customer.key, 'request', 3, { route: '/a' }, subscription.active_from);
    const access = await waitFor(async () => {
      const [entry] = (await api.ok(200, api.get(`/customers/${customer.key}/entitlement-access`))).data;
      return entry.usage === '3' ? entry : undefined;
    }, 'the 3 events of the first second', 20_000);
    assert.equal(access.balance, '7');
    const upcoming = await api.ok(200, api.get(`/customers/${customer.key}/upcoming-invoice`));
    assert.equal(upcoming.lines[0].quantity, '3');
  });
});
