/**
 * The catalogue's subscription cases (S01–S14): create (now, never earlier; one per customer, also under
 * concurrent creates), currency rules, cancel (immediate, next cycle, on a boundary) and its state
 * transitions, change of plan at one instant, version pinning, periods aligned to the anchor with
 * month-end clamping, proration of a partial first period, and which usage a subscription is billed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { boundary, parseCadence, parseInstant, periodIndexAt } from '../../../../plugins/metering/billing/shared/calendar.ts';
import { type TestGateway } from '../../../helpers/gateway.ts';
import { afterStart, anchorEndingIn, assertProblem, BillingApi, flatCard, key, planBody, unitCard, startBillingGateway } from './support.ts';

let gateway: TestGateway;
let api: BillingApi;
before(async () => ({ gateway, api } = await startBillingGateway()));
after(() => gateway?.stop());

const cancel = (id: string, body: unknown) => api.post(`/subscriptions/${id}/cancel`, body);

describe('subscriptions', () => {
  test('S01 subscribe by keys: 201 active from now, anchored at its start, named "<plan> v1"', async () => {
    const plan = await api.activePlan([flatCard('base', '5')]);
    const c = await api.customer();
    const before = Date.now();
    const s = await api.subscribe(c.key, plan.key);
    assert.equal(s.status, 'active');
    assert.ok(Date.parse(s.active_from) >= before - (before % 1000) && Date.parse(s.active_from) <= Date.now(), 'starts when created (at the start of that second), never earlier');
    assert.equal(s.billing_anchor, s.active_from);
    assert.equal(s.name, `${plan.key} v1`);
    assert.deepEqual(s.customer, { id: c.id, key: c.key });
    assert.equal(s.current_period.from, s.active_from);
    assert.equal(Date.parse(s.current_period.to) - Date.parse(s.current_period.from), 60_000);
    const listed = await api.ok(200, api.get(`/subscriptions?customer=${c.key}`));
    assert.deepEqual(listed.data.map((x: any) => x.id), [s.id]);
  });

  test('S02 a second subscription for the customer: 409 only_single_subscription_allowed_per_customer_at_a_time', async () => {
    const plan = await api.activePlan([flatCard('base', '5')]);
    const c = await api.customer();
    await api.subscribe(c.key, plan.key);
    const problem = assertProblem(await api.post('/subscriptions', { customer: { key: c.key }, plan: { key: plan.key } }), 409);
    assert.equal(problem.invalid_parameters[0].code, 'only_single_subscription_allowed_per_customer_at_a_time');
  });

  test('S03 concurrent creates for one customer: exactly one succeeds', async () => {
    const plan = await api.activePlan([flatCard('base', '5')]);
    const c = await api.customer();
    const answers = await Promise.all(Array.from({ length: 12 }, () => api.post('/subscriptions', { customer: { key: c.key }, plan: { key: plan.key } })));
    assert.deepEqual(answers.map((r) => r.status).sort(), [201, ...Array(11).fill(409)]);
    const listed = await api.ok(200, api.get(`/subscriptions?customer=${c.key}`));
    assert.equal(listed.data.length, 1);
  });

  test('S04 a EUR customer on a USD plan with prices: 400 "currency mismatch"; a free-only plan is fine', async () => {
    const priced = await api.activePlan([flatCard('base', '5')]);
    const c = await api.customer({ currency: 'EUR' });
    const res = await api.post('/subscriptions', { customer: { key: c.key }, plan: { key: priced.key } });
    assertProblem(res, 400);
    assert.match(res.text, /currency mismatch: customer currency is EUR, but subscription invoice currency is USD/);
    const feature = await api.feature(null);
    const free = await api.activePlan([{ key: feature.key, name: 'Access', feature_key: feature.key, price: { type: 'free' }, entitlement: { type: 'boolean' } }]);
    await api.subscribe(c.key, free.key);
  });

  test('S05 cancel at next_billing_cycle: 200, canceled, active_to = current_period.to', async () => {
    const plan = await api.activePlan([flatCard('base', '5')]);
    const c = await api.customer();
    const s = await api.subscribe(c.key, plan.key);
    const canceled = await api.ok(200, cancel(s.id, { timing: 'next_billing_cycle' }));
    assert.equal(canceled.status, 'canceled');
    assert.equal(canceled.active_to, s.current_period.to);
  });

  test('S06 cancel of a canceled subscription: 403 "transition cancel in state canceled not allowed"', async () => {
    const plan = await api.activePlan([flatCard('base', '5')]);
    const c = await api.customer();
    const s = await api.subscribe(c.key, plan.key);
    await api.ok(200, cancel(s.id, { timing: 'next_billing_cycle' }));
    const res = await cancel(s.id, { timing: 'immediate' });
    assertProblem(res, 403);
    assert.match(res.text, /transition cancel in state canceled not allowed/);
  });

  test('a canceled subscription continues with unschedule-cancelation; an active or ended one cannot (403)', async () => {
    const plan = await api.activePlan([flatCard('base', '5')]);
    const c = await api.customer();
    const s = await api.subscribe(c.key, plan.key);
    assertProblem(await api.post(`/subscriptions/${s.id}/unschedule-cancelation`), 403);
    await api.ok(200, cancel(s.id, { timing: 'next_billing_cycle' }));
    const continued = await api.ok(200, api.post(`/subscriptions/${s.id}/unschedule-cancelation`));
    assert.equal(continued.status, 'active');
    assert.equal(continued.active_to, undefined);
    assertProblem(await api.post('/subscriptions', { customer: { key: c.key }, plan: { key: plan.key } }), 409);
    await api.ok(200, cancel(s.id, {}));
    assertProblem(await api.post(`/subscriptions/${s.id}/unschedule-cancelation`), 403);
  });

  test('S07 cancel at a custom time: 400 "misaligned timing" off a boundary, 200 on one', async () => {
    const plan = await api.activePlan([flatCard('base', '5')]);
    const c = await api.customer();
    const anchor = new Date(Math.floor(Date.now() / 60_000) * 60_000).toISOString();
    const s = await api.subscribe(c.key, plan.key, { billing_anchor: anchor });
    const misaligned = new Date(Date.parse(anchor) + 5 * 60_000 + 30_000).toISOString();
    const res = await cancel(s.id, { timing: misaligned });
    assertProblem(res, 400, 'timing');
    assert.match(res.text, /misaligned timing/);
    const aligned = new Date(Date.parse(anchor) + 5 * 60_000).toISOString();
    const canceled = await api.ok(200, cancel(s.id, { timing: aligned }));
    assert.equal(Date.parse(canceled.active_to), Date.parse(aligned));
  });

  test('S08 cancel {} ends it now: inactive, active_to set, no current period', async () => {
    const plan = await api.activePlan([flatCard('base', '5')]);
    const c = await api.customer();
    const s = await api.subscribe(c.key, plan.key);
    const ended = await api.ok(200, cancel(s.id, {}));
    assert.equal(ended.status, 'inactive');
    assert.ok(Date.parse(ended.active_to) <= Date.now());
    assert.equal(ended.current_period, undefined);
    // The slot is free again: a new subscription is allowed.
    await api.subscribe(c.key, plan.key);
  });

  test('S09 change to plan B immediately: current.active_to == next.active_from, anchor carried over', async () => {
    const a = await api.activePlan([flatCard('base', '5')]);
    const b = await api.activePlan([flatCard('base', '9')]);
    const c = await api.customer();
    const s = await api.subscribe(c.key, a.key, { billing_anchor: anchorEndingIn(30_000) });
    const { current, next } = await api.ok(200, api.post(`/subscriptions/${s.id}/change`, { plan: { key: b.key }, timing: 'immediate' }));
    assert.equal(current.active_to, next.active_from);
    assert.equal(next.billing_anchor, s.billing_anchor);
    assert.equal(next.plan.key, b.key);
    assert.equal(next.status, 'active');
    assert.equal(current.status, 'inactive');
    // At the next cycle, the new one is scheduled until then.
    const later = await api.ok(200, api.post(`/subscriptions/${next.id}/change`, { plan: { key: a.key }, timing: 'next_billing_cycle' }));
    assert.equal(later.next.status, 'scheduled');
    assert.equal(later.current.active_to, next.current_period.to);
  });

  test('S10 publishing v2 leaves a subscription on v1 (and its prices)', async () => {
    const k = key('s10');
    await api.activePlan([flatCard('base', '5')], { key: k });
    const c = await api.customer();
    const s = await api.subscribe(c.key, k);
    const v2 = await api.ok(201, api.post('/plans', planBody(k, [flatCard('base', '50')])));
    await api.ok(200, api.post(`/plans/${v2.id}/publish`));
    const again = await api.ok(200, api.get(`/subscriptions/${s.id}`));
    assert.equal(again.plan.version, 1);
    const [invoice] = await api.invoicesWhen(c.key, 1);
    assert.equal(invoice.lines[0].amount, '5');
  });

  test('S11 anchor 2025-01-31 on P1M: [07-31, 08-31) holds 08-13, [09-30, 10-31) holds 09-30 (month ends clamp, no drift)', async () => {
    const anchor = parseInstant('2025-01-31T00:00:00Z')!;
    const month = parseCadence('P1M')!;
    const periodOf = (t: string) => {
      const n = periodIndexAt(anchor, month, parseInstant(t)!);
      return [boundary(anchor, month, n), boundary(anchor, month, n + 1)].map((x) => new Date(x).toISOString().slice(0, 10));
    };
    assert.deepEqual(periodOf('2025-08-13T00:00:00Z'), ['2025-07-31', '2025-08-31']);
    assert.deepEqual(periodOf('2025-09-30T00:00:00Z'), ['2025-09-30', '2025-10-31']);
    assert.deepEqual(periodOf('2025-02-28T12:00:00Z'), ['2025-02-28', '2025-03-31']);
    // Through the API: a subscription anchored on a 31st has its current period end on a month end (or the 31st).
    const plan = await api.activePlan([flatCard('base', '5', 'in_advance', { billing_cadence: 'P1M' })], { billing_cadence: 'P1M' });
    const c = await api.customer();
    const s = await api.subscribe(c.key, plan.key, { billing_anchor: '2025-01-31T00:00:00Z' });
    const end = new Date(s.current_period.to);
    const lastDay = new Date(Date.UTC(end.getUTCFullYear(), end.getUTCMonth() + 1, 0)).getUTCDate();
    assert.equal(end.getUTCDate(), Math.min(31, lastDay));
  });

  test('S12 a start after the anchor gives a short first period, and its flat fee is prorated', async () => {
    const plan = await api.activePlan([flatCard('base', '5')]);
    const c = await api.customer();
    const s = await api.subscribe(c.key, plan.key, { billing_anchor: anchorEndingIn(20_000) });
    const served = Date.parse(s.current_period.to) - Date.parse(s.current_period.from);
    assert.ok(served < 60_000 && served > 10_000, `first period is partial: ${served} ms`);
    const [invoice] = await api.invoicesWhen(c.key, 1);
    const expected = (Math.round((5 * served * 100) / 60_000) / 100).toString();
    assert.equal(invoice.lines[0].amount, expected);
    assert.deepEqual(invoice.lines[0].period, s.current_period);
  });

  test('S13 events before the start are never billed: 100 an hour before, 10 after → quantity 10', async () => {
    const f = await api.feature('api_calls');
    const plan = await api.activePlan([unitCard(f.key, '0.5')]);
    const c = await api.customer();
    await api.usage(c.key, 'request', 100, { route: '/x' }, new Date(Date.now() - 3_600_000).toISOString());
    const s = await api.subscribe(c.key, plan.key, { billing_anchor: anchorEndingIn(8_000) });
    await afterStart(s);
    await api.usage(c.key, 'request', 10, { route: '/x' });
    const [invoice] = await api.invoicesWhen(c.key, 1);
    assert.equal(invoice.lines[0].quantity, '10');
    assert.equal(invoice.lines[0].amount, '5');
  });

  test('S14 an in-advance fee is invoiced at once; the usage waits for the period end', async () => {
    const f = await api.feature('api_calls');
    const plan = await api.activePlan([flatCard('base', '5'), unitCard(f.key, '1')]);
    const c = await api.customer();
    const s = await api.subscribe(c.key, plan.key);
    const [advance] = await api.invoicesWhen(c.key, 1, 5_000);
    assert.deepEqual(advance.lines.map((l: any) => [l.rate_card_key, l.payment_term, l.amount]), [['base', 'in_advance', '5']]);
    assert.deepEqual(advance.period, s.current_period);
    const upcoming = await api.ok(200, api.get(`/customers/${c.key}/upcoming-invoice`));
    assert.deepEqual(upcoming.lines.map((l: any) => l.rate_card_key), [f.key]);
    assert.equal((await api.invoices(c.key)).length, 1);
  });

  test('a billing anchor or cancel time that is no date-time, or centuries away, is refused: 400', async () => {
    const plan = await api.activePlan([flatCard('base', '5')]);
    const c = await api.customer();
    for (const anchor of ['tomorrow', '9999-12-31T23:59:59Z', '0001-01-01T00:00:00Z', 42]) {
      assertProblem(await api.post('/subscriptions', { customer: { key: c.key }, plan: { key: plan.key }, billing_anchor: anchor }), 400, 'billing_anchor');
    }
    const s = await api.subscribe(c.key, plan.key);
    assertProblem(await cancel(s.id, { timing: '9999-12-31T00:00:00Z' }), 400, 'timing');
    assertProblem(await cancel(s.id, { timing: 'later' }), 400, 'timing');
  });

  test('unknown and deleted customers: 404 and 412', async () => {
    const plan = await api.activePlan([flatCard('base', '5')]);
    assertProblem(await api.post('/subscriptions', { customer: { key: key('ghost') }, plan: { key: plan.key } }), 404);
    const c = await api.customer();
    await api.ok(204, api.del(`/customers/${c.key}`));
    assertProblem(await api.post('/subscriptions', { customer: { id: c.id }, plan: { key: plan.key } }), 412);
  });
});
