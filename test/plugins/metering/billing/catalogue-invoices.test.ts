/**
 * The catalogue's rating and invoice cases (R01–R09, I01–I08, X01). Tier math is checked against
 * hand-computed tables, both on the price functions and through issued invoices (tier details,
 * rounding per line and tier in the currency's minor unit). Invoices: the live upcoming invoice,
 * issue after the period plus the collection period with quantities frozen, immutability, and what
 * Tollgate does where OpenMeter has draft-invoice actions the contract does not expose.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { alignedPeriod, parseCadence, parseInstant } from '../../../../plugins/metering/billing/shared/calendar.ts';
import { currencyOf, Decimal, formatDecimal, type Currency } from '../../../../plugins/metering/billing/shared/money.ts';
import type { Price } from '../../../../plugins/metering/billing/productcatalog/plan-model.ts';
import { rateFlat, rateUsage } from '../../../../plugins/metering/billing/invoice/rating.ts';
import { request, type TestGateway } from '../../../helpers/gateway.ts';
import { afterStart, anchorEndingIn, assertProblem, BillingApi, flatCard, key, planBody, sleep, unitCard, startBillingGateway } from './support.ts';

const USD = currencyOf('USD') as Currency;

/** R01/R02's graduated tiers (OpenMeter's rate/tieredgraduated_test.go), tier 3 and 4 unit prices given. */
function graduatedTiers(unit3: string, unit4: string): Price {
  return {
    type: 'graduated',
    tiers: [
      { up_to_amount: '5', flat_price: { amount: '100' }, unit_price: { amount: '0' } },
      { up_to_amount: '10', flat_price: { amount: '50' }, unit_price: null },
      { up_to_amount: '15', flat_price: null, unit_price: { amount: unit3 } },
      { up_to_amount: null, flat_price: null, unit_price: { amount: unit4 } },
    ],
  };
}

/** R03's volume tiers (rate/tieredvolume_test.go). */
const VOLUME: Price = {
  type: 'volume',
  tiers: [
    { up_to_amount: '5', flat_price: { amount: '100' }, unit_price: null },
    { up_to_amount: '10', flat_price: { amount: '150' }, unit_price: null },
    { up_to_amount: '15', flat_price: null, unit_price: { amount: '10' } },
    { up_to_amount: null, flat_price: null, unit_price: { amount: '5' } },
  ],
};

const amountOf = (price: Price, quantity: string, currency = USD) => formatDecimal(rateUsage(price as any, new Decimal(quantity), currency).amount);

describe('rating: tier math against hand-computed tables', () => {
  test('R01 graduated ≤5{flat 100, unit 0}, ≤10{flat 50}, ≤15{unit 5}, ∞{unit 1} at 22: 0+100+50+25+7 = 182', () => {
    const rated = rateUsage(graduatedTiers('5', '1') as any, new Decimal('22'), USD);
    assert.equal(formatDecimal(rated.amount), '182');
    assert.deepEqual(rated.tiers, [
      { from: '0', to: '5', quantity: '5', amount: '100' },
      { from: '5', to: '10', quantity: '5', amount: '50' },
      { from: '10', to: '15', quantity: '5', amount: '25' },
      { from: '15', to: null, quantity: '7', amount: '7' },
    ]);
  });

  test('R02 graduated with tier 3 at 10 and tier 4 at 5: 0 → 100 (tier 1 flat always), 3 → 100, 5.001 → 150, 12 → 170, 22 → 235', () => {
    const price = graduatedTiers('10', '5');
    const table: [string, string][] = [['0', '100'], ['3', '100'], ['5.001', '150'], ['12', '170'], ['22', '235']];
    for (const [quantity, amount] of table) assert.equal(amountOf(price, quantity), amount, `quantity ${quantity}`);
  });

  test('R03 volume ≤5 flat 100, ≤10 flat 150, ≤15 unit 10, ∞ unit 5: 3 → 100, 14 → 140, 15 → 150, 16 → 80, 100 → 500 (up_to inclusive)', () => {
    const table: [string, string][] = [['3', '100'], ['14', '140'], ['15', '150'], ['16', '80'], ['100', '500']];
    for (const [quantity, amount] of table) assert.equal(amountOf(VOLUME, quantity), amount, `quantity ${quantity}`);
    assert.deepEqual(rateUsage(VOLUME as any, new Decimal('16'), USD).tiers, [{ from: '15', to: null, quantity: '16', amount: '80' }]);
  });

  test('R04 Tollgate has no commitments (minimum spend): the volume price alone at quantity 0 is tier 1\'s 100', () => {
    assert.equal(amountOf(VOLUME, '0'), '100');
  });

  test('R05 unit 100 at quantity 10: 1000', () => {
    assert.equal(amountOf({ type: 'unit', amount: '100' }, '10'), '1000');
  });

  test('R06/R07 Tollgate has no minimum or maximum commitments: a rate card with them is refused (400)', async () => {
    const res = await api.post('/plans', planBody(key('r06'), [{ ...unitCard('x', '10'), commitments: { minimum_amount: '100' } }]));
    assertProblem(res, 400, 'commitments');
  });

  test('R08 $5/month prorated: Jan 1–15 → 2.26 (14/31), Jan 15–Feb 1 → 2.74 (17/31), February → 5', () => {
    const month = parseCadence('P1M')!;
    const january = alignedPeriod(parseInstant('2025-01-01T00:00:00Z')!, month, 0);
    const mid = parseInstant('2025-01-15T00:00:00Z')!;
    const full = january.to - january.from;
    assert.equal(formatDecimal(rateFlat('5', mid - january.from, full, true, USD)), '2.26');
    assert.equal(formatDecimal(rateFlat('5', january.to - mid, full, true, USD)), '2.74');
    const february = alignedPeriod(parseInstant('2025-01-01T00:00:00Z')!, month, 1);
    assert.equal(formatDecimal(rateFlat('5', february.to - february.from, february.to - february.from, true, USD)), '5');
    assert.equal(formatDecimal(rateFlat('5', mid - january.from, full, false, USD)), '5', 'without proration the whole fee');
  });

  test('rounding is per line to the minor unit, half away from zero: USD 2 digits, JPY 0, BHD 3', () => {
    assert.equal(amountOf({ type: 'unit', amount: '0.005' }, '1'), '0.01');
    assert.equal(amountOf({ type: 'unit', amount: '0.0049' }, '1'), '0');
    assert.equal(amountOf({ type: 'unit', amount: '0.5' }, '3', currencyOf('JPY') as Currency), '2');
    assert.equal(amountOf({ type: 'unit', amount: '0.0005' }, '1', currencyOf('BHD') as Currency), '0.001');
    // 0.1 + 0.2 in binary floating point is 0.30000000000000004; here it is exact.
    assert.equal(amountOf({ type: 'unit', amount: '0.1' }, '3.000000001'), '0.3');
  });
});

let gateway: TestGateway;
let api: BillingApi;
before(async () => ({ gateway, api } = await startBillingGateway()));
after(() => gateway?.stop());

/** Subscribes a new customer to `cards` with a first period ending in `endsInMs`. */
async function cycle(cards: Record<string, unknown>[], endsInMs = 7_000): Promise<{ customer: any; subscription: any; plan: any }> {
  const plan = await api.activePlan(cards);
  const customer = await api.customer();
  const subscription = await api.subscribe(customer.key, plan.key, { billing_anchor: anchorEndingIn(endsInMs) });
  return { customer, subscription, plan };
}

const arrearsOf = (invoices: any[]) => invoices.filter((i) => i.lines.every((l: any) => l.payment_term === 'in_arrears'));

describe('invoices', () => {
  test('R01/R03 through an issued invoice: graduated and volume lines with tier details, per-tier rounding, total = sum of lines', async () => {
    const calls = await api.feature('api_calls');
    const tokens = await api.feature('tokens');
    const { customer, subscription } = await cycle([
      { key: calls.key, name: 'Calls', feature_key: calls.key, price: graduatedTiers('5', '1') },
      { key: tokens.key, name: 'Tokens', feature_key: tokens.key, price: { type: 'volume', tiers: [{ up_to_amount: '10', unit_price: { amount: '0.333' } }, { unit_price: { amount: '0.1' } }] } },
    ]);
    await afterStart(subscription);
    await api.usage(customer.key, 'request', 22, { route: '/a' });
    await api.usage(customer.key, 'prompt', 1, { tokens: '7.5', model: 'm' });
    const [invoice] = await api.invoicesWhen(customer.key, 1);
    const byKey = Object.fromEntries(invoice.lines.map((l: any) => [l.rate_card_key, l]));
    assert.equal(byKey[calls.key].quantity, '22');
    assert.equal(byKey[calls.key].amount, '182');
    assert.equal(byKey[calls.key].tiers.length, 4);
    assert.equal(byKey[tokens.key].quantity, '7.5');
    // 7.5 × 0.333 = 2.4975 → 2.50 (half away from zero).
    assert.equal(byKey[tokens.key].amount, '2.5');
    assert.equal(invoice.totals.total, '184.5');
    assert.equal(invoice.totals.amount, invoice.totals.total);
    assert.equal(invoice.currency, 'USD');
    assert.equal(invoice.status, 'issued');
    assert.match(invoice.number, /^INV-\d{6}$/);
  });

  test('R09 a flat price of 0 makes no line', async () => {
    const calls = await api.feature('api_calls');
    const { customer } = await cycle([flatCard('zero_advance', '0'), flatCard('zero_arrears', '0', 'in_arrears'), unitCard(calls.key, '1')]);
    await api.usage(customer.key, 'request', 2, { route: '/a' });
    const [invoice] = await api.invoicesWhen(customer.key, 1);
    assert.deepEqual(invoice.lines.map((l: any) => l.rate_card_key), [calls.key]);
  });

  test('I01 the live (gathering) invoice: GET by its id 404 until issued, excluded from lists', async () => {
    const calls = await api.feature('api_calls');
    const { customer, subscription } = await cycle([flatCard('base', '3', 'in_arrears'), unitCard(calls.key, '0.25')], 30_000);
    await afterStart(subscription);
    await api.usage(customer.key, 'request', 4, { route: '/a' });
    const upcoming = await api.ok(200, api.get(`/customers/${customer.key}/upcoming-invoice`));
    assert.equal(upcoming.status, 'gathering');
    assert.equal(upcoming.number, null);
    assert.deepEqual(upcoming.period, subscription.current_period);
    // The first period is partial (the anchor lies before the start): the flat fee is prorated.
    const served = Date.parse(subscription.current_period.to) - Date.parse(subscription.current_period.from);
    const base = (Math.round((3 * served * 100) / 60_000) / 100).toString();
    assert.deepEqual(upcoming.lines.map((l: any) => [l.rate_card_key, l.amount]), [['base', base], [calls.key, '1']]);
    assert.equal(upcoming.totals.total, String(Number(base) + 1));
    assertProblem(await api.get(`/invoices/${upcoming.id}`), 404);
    assert.equal((await api.invoices(customer.key)).length, 0);
  });

  test('I02 an invoice is issued only after the period end plus the collection period', async () => {
    const calls = await api.feature('api_calls');
    const { customer } = await cycle([unitCard(calls.key, '1')], 2_000);
    await api.usage(customer.key, 'request', 1, { route: '/a' });
    const [invoice] = await api.invoicesWhen(customer.key, 1);
    const late = Date.parse(invoice.issued_at) - Date.parse(invoice.period.to);
    assert.ok(late >= 1_000, `issued ${late} ms after the period end (collection period PT1S)`);
    assert.equal((await api.ok(200, api.get(`/invoices/${invoice.id}`))).id, invoice.id);
  });

  test('I03 quantities are frozen at issue: events for the period that arrive later are not billed; Tollgate has no snapshot action (404)', async () => {
    const calls = await api.feature('api_calls');
    const { customer, subscription } = await cycle([unitCard(calls.key, '1')]);
    await afterStart(subscription);
    await api.usage(customer.key, 'request', 3, { route: '/a' });
    const [issued] = await api.invoicesWhen(customer.key, 1);
    assert.equal(issued.lines[0].quantity, '3');
    const inPeriod = new Date(Date.parse(issued.period.to) - 1_000).toISOString();
    await api.usage(customer.key, 'request', 5, { route: '/a' }, inPeriod);
    await sleep(1_200);
    assert.deepEqual(await api.ok(200, api.get(`/invoices/${issued.id}`)), issued);
    assertProblem(await api.post(`/invoices/${issued.id}/snapshot-quantities`), 404);
  });

  test('I04/I05 Tollgate issues invoices itself (no draft to advance or approve): those actions are 404', async () => {
    const { customer } = await cycle([flatCard('base', '1')]);
    const [invoice] = await api.invoicesWhen(customer.key, 1);
    assert.equal(invoice.status, 'issued');
    assertProblem(await api.post(`/invoices/${invoice.id}/advance`), 404);
    assertProblem(await api.post(`/invoices/${invoice.id}/approve`), 404);
  });

  test('I06 an issued invoice cannot be deleted: 405', async () => {
    const { customer } = await cycle([flatCard('base', '1')]);
    const [invoice] = await api.invoicesWhen(customer.key, 1);
    assertProblem(await api.del(`/invoices/${invoice.id}`), 405);
  });

  test('I07 a period with no billable line issues no invoice; a zero-total line of some usage is still issued', async () => {
    const flag = await api.feature(null);
    const free = await cycle([{ key: flag.key, name: 'Flag', feature_key: flag.key, price: { type: 'free' }, entitlement: { type: 'boolean' } }], 1_500);
    const calls = await api.feature('api_calls');
    const zero = await cycle([unitCard(calls.key, '0')], 1_500);
    await api.usage(zero.customer.key, 'request', 3, { route: '/a' });
    const [issued] = await api.invoicesWhen(zero.customer.key, 1);
    assert.equal(issued.totals.total, '0');
    assert.equal(issued.lines[0].quantity, '3');
    assert.equal((await api.invoices(free.customer.key)).length, 0);
  });

  test('I08 an issued invoice never changes when the subscription changes afterwards', async () => {
    const calls = await api.feature('api_calls');
    const { customer, subscription } = await cycle([flatCard('base', '5', 'in_arrears'), unitCard(calls.key, '1')], 2_000);
    const [issued] = await api.invoicesWhen(customer.key, 1);
    const other = await api.activePlan([flatCard('base', '50', 'in_arrears')]);
    await api.ok(200, api.post(`/subscriptions/${subscription.id}/change`, { plan: { key: other.key }, timing: 'immediate' }));
    assert.deepEqual(await api.ok(200, api.get(`/invoices/${issued.id}`)), issued);
    const listed = await api.invoices(customer.key);
    assert.deepEqual(listed[0], issued);
    assert.equal(arrearsOf(listed).length, listed.length);
  });

  test('a canceled subscription gets a last invoice for its final partial period', async () => {
    const { customer, subscription } = await cycle([flatCard('base', '6', 'in_arrears')], 40_000);
    await sleep(1_000);
    const ended = await api.ok(200, api.post(`/subscriptions/${subscription.id}/cancel`, { timing: 'immediate' }));
    const [invoice] = await api.invoicesWhen(customer.key, 1);
    assert.equal(invoice.period.to, ended.active_to);
    const served = Date.parse(ended.active_to) - Date.parse(subscription.active_from);
    assert.equal(invoice.lines[0].amount, (Math.round((6 * served * 100) / 60_000) / 100).toString());
  });

  test('X01 a body that is not JSON: 400 naming the body', async () => {
    const res = await request(`${api.base}/customers`, { method: 'POST', headers: { authorization: `Bearer ${api.token}`, 'content-type': 'application/json' }, body: '{' });
    assertProblem(res, 400, 'body');
  });
});
