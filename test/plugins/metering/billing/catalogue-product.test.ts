/**
 * The catalogue's feature and plan cases (F01–F04, P01–P18): features on meters with dimension filters
 * and their archive guard; plan versions (draft → publish → archive), OpenMeter's critical codes (400 at
 * create) and warnings (saved on the draft, blocking publish), and which version a subscription buys.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type TestGateway } from '../../../helpers/gateway.ts';
import { assertProblem, BillingApi, flatCard, key, planBody, unitCard, startBillingGateway } from './support.ts';

let gateway: TestGateway;
let api: BillingApi;
before(async () => ({ gateway, api } = await startBillingGateway()));
after(() => gateway?.stop());

/** A 400 whose invalid_parameters carry `code`. */
function assertCode(res: { status: number; text: string; json(): any; headers: any }, code: string): void {
  const problem = assertProblem(res as any, 400);
  assert.ok(problem.invalid_parameters?.some((p: any) => p.rule === code || p.code === code), `expected code ${code}: ${res.text}`);
}

function codes(plan: any): string[] {
  return plan.validation_errors.map((e: any) => e.code);
}

describe('features', () => {
  test('a feature on a meter with a dimension filter; GET by key and id; listed', async () => {
    const f = await api.feature('api_calls', { meter: { key: 'api_calls', filters: { route: { eq: '/orders' } } } });
    assert.deepEqual(f.meter.filters, { route: { eq: '/orders' } });
    assert.equal((await api.ok(200, api.get(`/features/${f.key}`))).id, f.id);
    assert.equal((await api.ok(200, api.get(`/features/${f.id}`))).key, f.key);
    const list = await api.ok(200, api.get('/features?page[size]=1000'));
    assert.ok(list.data.some((x: any) => x.id === f.id));
  });

  test('a feature without a meter (static/boolean)', async () => {
    const f = await api.feature(null);
    assert.equal(f.meter, undefined);
  });

  test('F01 a feature on an AVG meter is refused: 400 aggregation not allowed', async () => {
    const res = await api.post('/features', { key: key('f01'), name: 'Latency', meter: { key: 'latency_avg' } });
    assertProblem(res, 400, 'meter');
    assert.match(res.text, /aggregation avg.*features can only be created for meters with aggregation sum, count, unique_count, latest/);
  });

  test('F02 a filter on a dimension the meter does not have: 400 invalid filters, listing the available ones', async () => {
    const res = await api.post('/features', { key: key('f02'), name: 'By region', meter: { key: 'tokens', filters: { region: { eq: 'eu' } } } });
    assertProblem(res, 400, 'meter.filters');
    assert.match(res.text, /invalid filters for feature.*region.*available columns: model/);
    assertProblem(await api.post('/features', { key: key('f02'), name: 'x', meter: { key: 'no_such_meter' } }), 404);
  });

  test('F03 a live feature key cannot be created twice: 409', async () => {
    const f = await api.feature('api_calls');
    assertProblem(await api.post('/features', { key: f.key, name: 'Again', meter: { key: 'api_calls' } }), 409);
  });

  test('F04 DELETE of a feature an active plan uses: 403 "referenced by"; after archiving the plan, 204 and the key is free', async () => {
    const f = await api.feature('api_calls');
    const plan = await api.activePlan([unitCard(f.key, '1')]);
    const res = await api.del(`/features/${f.key}`);
    assertProblem(res, 403);
    assert.match(res.text, /referenced by active plan/);
    await api.ok(200, api.post(`/plans/${plan.id}/archive`));
    await api.ok(204, api.del(`/features/${f.key}`));
    assertProblem(await api.get(`/features/${f.key}`), 404);
    await api.feature('api_calls', { key: f.key });
  });
});

describe('plans', () => {
  test('P01 create: 201, draft, version 1', async () => {
    const body = planBody(key('p01'), [flatCard('base', '5')]);
    const plan = await api.ok(201, api.post('/plans', body));
    assert.equal(plan.status, 'draft');
    assert.equal(plan.version, 1);
    assert.equal(plan.effective_from, null);
    assert.deepEqual(plan.validation_errors, []);
  });

  test('P02 phases: [] is refused: 400, rule min_items', async () => {
    const problem = assertProblem(await api.post('/plans', planBody(key('p02'), [], { phases: [] })), 400, 'phases');
    assert.ok(problem.invalid_parameters.some((p: any) => p.field === 'phases' && p.rule === 'min_items'));
  });

  test('P03 duplicated phase keys: 400 plan_phase_duplicated_key', async () => {
    const phase = { key: 'main', name: 'Main', duration: 'P1M', rate_cards: [flatCard('base', '1')] };
    assertCode(await api.post('/plans', planBody(key('p03'), [], { phases: [phase, { ...phase, duration: null }] })), 'plan_phase_duplicated_key');
  });

  test('P04 a phase without rate cards: 201 with a warning, publish 400 with its code, fixed and published 200', async () => {
    const k = key('p04');
    const draft = await api.ok(201, api.post('/plans', planBody(k, [])));
    assert.ok(codes(await api.ok(200, api.get(`/plans/${draft.id}`))).includes('plan_phase_has_no_rate_cards'));
    assertCode(await api.post(`/plans/${draft.id}/publish`), 'plan_phase_has_no_rate_cards');
    const fixed = await api.ok(200, api.put(`/plans/${draft.id}`, planBody(k, [flatCard('base', '5')])));
    assert.deepEqual(fixed.validation_errors, []);
    const published = await api.ok(200, api.post(`/plans/${draft.id}/publish`));
    assert.equal(published.status, 'active');
  });

  test('P05 a non-last phase without duration blocks publish: 400 plan_has_non_last_phase_with_no_duration', async () => {
    const phases = [
      { key: 'trial', name: 'Trial', duration: null, rate_cards: [flatCard('base', '0')] },
      { key: 'main', name: 'Main', duration: null, rate_cards: [flatCard('base', '5')] },
    ];
    const draft = await api.ok(201, api.post('/plans', planBody(key('p05'), [], { phases })));
    assert.ok(codes(draft).includes('plan_has_non_last_phase_with_no_duration'));
    assertCode(await api.post(`/plans/${draft.id}/publish`), 'plan_has_non_last_phase_with_no_duration');
  });

  test('P06 a last phase with a duration blocks publish: 400 plan_has_last_phase_with_duration', async () => {
    const phases = [{ key: 'main', name: 'Main', duration: 'P1M', rate_cards: [flatCard('base', '5')] }];
    const draft = await api.ok(201, api.post('/plans', planBody(key('p06'), [], { phases })));
    assertCode(await api.post(`/plans/${draft.id}/publish`), 'plan_has_last_phase_with_duration');
  });

  test('P07 publishing v2 archives v1 with effective_to = v2.effective_from', async () => {
    const k = key('p07');
    const v1 = await api.activePlan([flatCard('base', '5')], { key: k });
    const draft = await api.ok(201, api.post('/plans', planBody(k, [flatCard('base', '6')])));
    assert.equal(draft.version, 2);
    assertProblem(await api.post('/plans', planBody(k, [flatCard('base', '7')])), 409);
    const v2 = await api.ok(200, api.post(`/plans/${draft.id}/publish`));
    const old = await api.ok(200, api.get(`/plans/${v1.id}`));
    assert.equal(old.status, 'archived');
    assert.equal(old.effective_to, v2.effective_from);
    assert.equal(v2.status, 'active');
  });

  test('P08 PUT on an active plan: 400 "only Plans in [draft scheduled]"', async () => {
    const plan = await api.activePlan([flatCard('base', '5')]);
    const res = await api.put(`/plans/${plan.id}`, planBody(plan.key, [flatCard('base', '9')]));
    assertProblem(res, 400);
    assert.match(res.text, /only Plans in \[draft scheduled\] can be updated/);
  });

  test('P09 DELETE active: 400; archive: 200; DELETE: 204', async () => {
    const plan = await api.activePlan([flatCard('base', '5')]);
    assertProblem(await api.del(`/plans/${plan.id}`), 400);
    assert.equal((await api.ok(200, api.post(`/plans/${plan.id}/archive`))).status, 'archived');
    await api.ok(204, api.del(`/plans/${plan.id}`));
    assertProblem(await api.get(`/plans/${plan.id}`), 404);
  });

  test('P10 a P2W rate card on a P1M plan: rate_card_billing_cadence_unaligned on the draft, publish 400', async () => {
    const draft = await api.ok(201, api.post('/plans', planBody(key('p10'), [flatCard('base', '5', 'in_advance', { billing_cadence: 'P2W' })], { billing_cadence: 'P1M' })));
    assert.ok(codes(draft).includes('rate_card_billing_cadence_unaligned'));
    assertCode(await api.post(`/plans/${draft.id}/publish`), 'rate_card_billing_cadence_unaligned');
  });

  test('P11 currency ZZZZ: 400 currency_not_found; a non-fiat one: currency_invalid', async () => {
    assertCode(await api.post('/plans', planBody(key('p11'), [flatCard('base', '5')], { currency: 'ZZZZ' })), 'currency_not_found');
    assertCode(await api.post('/plans', planBody(key('p11'), [flatCard('base', '5')], { currency: 'XAU' })), 'currency_invalid');
  });

  test('P12 Tollgate accepts any cadence of whole minutes from PT1M (P5D included); PT30S, P0D and words are plan_billing_cadence_invalid', async () => {
    await api.ok(201, api.post('/plans', planBody(key('p12'), [flatCard('base', '5', 'in_advance', { billing_cadence: 'P5D' })], { billing_cadence: 'P5D' })));
    for (const cadence of ['PT30S', 'P0D', 'monthly', 'PT1M30S', '-P1M']) {
      assertCode(await api.post('/plans', planBody(key('p12'), [flatCard('base', '5')], { billing_cadence: cadence })), 'plan_billing_cadence_invalid');
    }
  });

  test('P13 tiers without an open-ended tier (or with two) are invalid: 400', async () => {
    const f = await api.feature('api_calls');
    const tiers = [{ up_to_amount: '5', unit_price: { amount: '1' } }, { up_to_amount: '10', unit_price: { amount: '0.5' } }];
    for (const type of ['graduated', 'volume']) {
      assertCode(await api.post('/plans', planBody(key('p13'), [{ ...unitCard(f.key, '1'), price: { type, tiers } }])), 'price_tiers_invalid');
    }
    const twoOpen = [{ unit_price: { amount: '1' } }, { flat_price: { amount: '2' } }];
    assertCode(await api.post('/plans', planBody(key('p13'), [{ ...unitCard(f.key, '1'), price: { type: 'graduated', tiers: twoOpen } }])), 'price_tiers_invalid');
  });

  test('P14 a unit price without a feature: warning usage_based_price_with_no_feature, publish 400', async () => {
    const draft = await api.ok(201, api.post('/plans', planBody(key('p14'), [{ key: 'calls', name: 'Calls', price: { type: 'unit', amount: '1' } }])));
    assert.ok(codes(draft).includes('usage_based_price_with_no_feature'));
    assertCode(await api.post(`/plans/${draft.id}/publish`), 'usage_based_price_with_no_feature');
  });

  test('P15 a rate card key other than its feature key: 400 rate_card_key_feature_key_mismatch', async () => {
    const f = await api.feature('api_calls');
    assertCode(await api.post('/plans', planBody(key('p15'), [{ ...unitCard(f.key, '1'), key: 'calls' }])), 'rate_card_key_feature_key_mismatch');
    assertCode(await api.post('/plans', planBody(key('p15'), [unitCard('no_such_feature', '1')])), 'rate_card_feature_not_found');
  });

  test('P16 a metered entitlement on a one-time card without usage_period: 400 "requires usage_period"', async () => {
    const f = await api.feature('api_calls');
    const card = { key: f.key, name: 'Once', feature_key: f.key, price: { type: 'flat', amount: '10' }, billing_cadence: null, entitlement: { type: 'metered', limit: '10' } };
    const res = await api.post('/plans', planBody(key('p16'), [card]));
    assertCode(res, 'entitlement_template_usage_period_required');
    assert.match(res.text, /requires usage_period/);
    await api.ok(201, api.post('/plans', planBody(key('p16'), [{ ...card, entitlement: { type: 'metered', limit: '10', usage_period: 'PT1M' } }])));
  });

  test('P17 with v1 active and v2 a draft, subscribing by key pins v1', async () => {
    const k = key('p17');
    const v1 = await api.activePlan([flatCard('base', '5')], { key: k });
    await api.ok(201, api.post('/plans', planBody(k, [flatCard('base', '6')])));
    const c = await api.customer();
    const s = await api.subscribe(c.key, k);
    assert.deepEqual(s.plan, { id: v1.id, key: k, version: 1 });
    assert.equal(s.name, `${k} v1`);
  });

  test('P18 subscribing to a draft by id: 400 "not active"', async () => {
    const draft = await api.ok(201, api.post('/plans', planBody(key('p18'), [flatCard('base', '5')])));
    const c = await api.customer();
    const res = await api.post('/subscriptions', { customer: { key: c.key }, plan: { id: draft.id } });
    assertProblem(res, 400);
    assert.match(res.text, /is not active at/);
  });
});
