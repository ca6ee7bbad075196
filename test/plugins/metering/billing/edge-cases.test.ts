/**
 * Billing edge cases found by an independent billing catalogue and by hand (issue 27, item 7): the
 * regression tests, against a real gateway, of what main got wrong, beside neighbouring cases the fixes
 * must leave as they were.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type TestGateway } from '../../../helpers/gateway.ts';
import { anchorEndingIn, assertProblem, BillingApi, flatCard, key, planBody, startBillingGateway, unitCard } from './support.ts';

let gateway: TestGateway;
let api: BillingApi;
before(async () => ({ gateway, api } = await startBillingGateway()));
after(() => gateway?.stop());

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
