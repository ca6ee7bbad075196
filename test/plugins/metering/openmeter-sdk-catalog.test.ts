/**
 * The official `@openmeter/sdk` against the gateway: features and plans (versions, publish, archive)
 * made through v1's shapes, each checked against the v3 API's view of the same records; add-ons,
 * which Tollgate's catalogue does not have, refused with 501.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { billingSdkSuite, sdkError } from './openmeter-sdk-support.ts';

const suite = billingSdkSuite();

test('features: created with a meter and group-by filters, read, listed and archived, as v3 sees them', async () => {
  const feature = (await suite.client.features.create({ key: 'gpt4_tokens', name: 'GPT-4 tokens', meterSlug: 'tokens', meterGroupByFilters: { model: 'gpt-4' }, metadata: { team: 'ai' } }))!;
  assert.equal(feature.meterSlug, 'tokens');
  assert.deepEqual(feature.meterGroupByFilters, { model: 'gpt-4' });
  const onV3 = (await suite.v3.get('/features/gpt4_tokens')).json();
  assert.equal(onV3.id, feature.id);
  assert.deepEqual(onV3.meter.filters, { model: { eq: 'gpt-4' } });
  assert.deepEqual(onV3.labels, { team: 'ai' });

  const advanced = (await suite.client.features.create({ key: 'any_model', name: 'Any model', meterSlug: 'tokens', advancedMeterGroupByFilters: { model: { $in: ['a', 'b'] } } }))!;
  assert.deepEqual(advanced.advancedMeterGroupByFilters, { model: { $in: ['a', 'b'] } });
  assert.equal((await suite.client.features.create({ key: 'sso', name: 'SSO' }))!.meterSlug, undefined);

  assert.equal((await suite.client.features.get('gpt4_tokens'))!.id, feature.id);
  assert.deepEqual((await suite.client.features.list() as any[]).map((f) => f.key), ['any_model', 'gpt4_tokens', 'sso']);
  assert.deepEqual((await suite.client.features.list({ meterSlug: ['tokens'], page: 1, pageSize: 1 }) as any).items.map((f: any) => f.key), ['any_model']);
  await suite.client.features.delete('any_model');
  assert.ok((await suite.v3.get(`/features/${advanced.id}`)).status === 404, 'archived on v3 too');

  const unknownMeter = await sdkError(suite.client.features.create({ key: 'x', name: 'X', meterSlug: 'nope' }), 404);
  assert.match(unknownMeter.message, /nope/);
  await sdkError(suite.client.features.create({ key: 'Bad Key', name: 'X' }), 400);
});

test('plans: a v1 plan with a flat fee, a tiered usage price and entitlements, published, versioned and archived', async () => {
  const plan = (await suite.client.plans.create({
    key: 'pro',
    name: 'Pro',
    currency: 'USD',
    billingCadence: 'P1M',
    phases: [{
      key: 'main',
      name: 'Main',
      duration: null,
      rateCards: [
        { type: 'flat_fee', key: 'base', name: 'Base fee', billingCadence: 'P1M', price: { type: 'flat', amount: '9.5', paymentTerm: 'in_advance' } },
        {
          type: 'usage_based', key: 'gpt4_tokens', name: 'Tokens', featureKey: 'gpt4_tokens', billingCadence: 'P1M',
          price: { type: 'tiered', mode: 'graduated', tiers: [{ upToAmount: '1000', flatPrice: null, unitPrice: { type: 'unit', amount: '0' } }, { flatPrice: null, unitPrice: { type: 'unit', amount: '0.002' } }] },
          entitlementTemplate: { type: 'metered', issueAfterReset: 5000, usagePeriod: 'P1M', isSoftLimit: true },
        },
        { type: 'flat_fee', key: 'sso', name: 'SSO', featureKey: 'sso', billingCadence: null, price: null, entitlementTemplate: { type: 'static', config: '{"seats":3}' } },
      ],
    }],
  } as any))!;
  assert.equal(plan.status, 'draft');
  assert.equal(plan.version, 1);
  const onV3 = (await suite.v3.get(`/plans/${plan.id}`)).json();
  const [base, tokens, sso] = onV3.phases[0].rate_cards;
  assert.deepEqual([base.price, base.payment_term], [{ type: 'flat', amount: '9.5' }, 'in_advance']);
  assert.equal(tokens.price.type, 'graduated');
  assert.deepEqual(tokens.price.tiers.map((t: any) => [t.up_to_amount, t.unit_price.amount]), [['1000', '0'], [null, '0.002']]);
  assert.deepEqual(tokens.entitlement, { type: 'metered', limit: '5000', is_soft_limit: true, usage_period: 'P1M' });
  assert.deepEqual([sso.price, sso.entitlement], [{ type: 'free' }, { type: 'static', config: '{"seats":3}' }]);

  // And back in v1's shapes, as the SDK sent them.
  const cards = plan.phases[0].rateCards as any[];
  assert.deepEqual(cards.map((c) => c.type), ['flat_fee', 'usage_based', 'flat_fee']);
  assert.deepEqual(cards[1].price.tiers[0], { upToAmount: '1000', flatPrice: null, unitPrice: { type: 'unit', amount: '0' } });
  assert.deepEqual(cards[1].entitlementTemplate, { type: 'metered', isSoftLimit: true, usagePeriod: 'P1M', issueAfterReset: 5000 });
  assert.equal(cards[2].price, null);

  const published = (await suite.client.plans.publish(plan.id))!;
  assert.equal(published.status, 'active');
  assert.equal((await suite.v3.get(`/plans/${plan.id}`)).json().status, 'active');
  assert.equal((await suite.client.plans.get('pro'))!.id, plan.id, 'by key: the active version');

  const next = (await suite.client.plans.create({ key: 'pro', name: 'Pro 2', currency: 'USD', billingCadence: 'P1M', phases: [{ key: 'main', name: 'Main', duration: null, rateCards: [cards[0]] }] } as any))!;
  assert.equal(next.version, 2);
  const renamed = (await suite.client.plans.update(next.id, { name: 'Pro II', billingCadence: 'P1M', phases: next.phases } as any))!;
  assert.equal(renamed.name, 'Pro II');
  assert.equal((await suite.client.plans.get('pro', { includeLatest: true } as any))!.version, 2);
  assert.deepEqual((await suite.client.plans.list({ key: ['pro'] }))!.items.map((p) => [p.version, p.status]), [[1, 'active'], [2, 'draft']]);
  await suite.client.plans.delete(next.id);
  assert.equal((await suite.v3.get(`/plans/${next.id}`)).status, 404);

  const archived = (await suite.client.plans.archive(plan.id))!;
  assert.equal(archived.status, 'archived');
  const invalid = await sdkError(suite.client.plans.create({ key: 'bad', name: 'Bad', currency: 'XXX', billingCadence: 'P1M', phases: [] } as any), 400);
  assert.match(invalid.message, /currency/);
});

test('add-ons: none in Tollgate, listed empty, created 501', async () => {
  assert.equal((await suite.client.addons.list())!.totalCount, 0);
  const refused = await sdkError(suite.client.addons.create({ key: 'extra', name: 'Extra', currency: 'USD', instanceType: 'single', rateCards: [] } as any), 501);
  assert.match(refused.message, /add-ons/);
});
