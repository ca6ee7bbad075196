/**
 * Exactly-once invoices under a crash: many subscriptions whose first periods all end at the same
 * moment, each with its own usage; the gateway process is killed with SIGKILL while the scheduler is
 * issuing their invoices, then restarted on the same data directory. Afterwards every subscription's
 * period has exactly one invoice, complete (every line, the right quantity and total), and invoice
 * numbers are unique.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Decimal, formatDecimal } from '../../../../plugins/metering/billing/shared/money.ts';
import { spawnGateway, tempDir, type SpawnedGateway } from '../../../helpers/gateway.ts';
import { waitFor } from '../../../helpers/support.ts';
import { crash, inParallel } from '../catalogue-support.ts';
import { afterStart, anchorEndingIn, BillingApi, billingConfig, flatCard, key, sleep, unitCard } from './support.ts';

const SUBSCRIPTIONS = 120;

const running: SpawnedGateway[] = [];
after(async () => {
  for (const g of running) await crash(g);
});

async function allInvoices(api: BillingApi): Promise<any[]> {
  return (await api.ok(200, api.get('/invoices?page[size]=1000'))).data;
}

test('kill -9 while invoices are being issued: after the restart every period has exactly one complete invoice', { timeout: 120_000 }, async (t) => {
  const dataDir = tempDir();
  const config = billingConfig({ collectionPeriod: 'PT1S' });
  let gateway = await spawnGateway(config, { dataDir });
  running.push(gateway);
  let api = await BillingApi.connect(gateway.https);

  const feature = await api.feature('api_calls');
  const plan = await api.activePlan([flatCard('base', '2', 'in_arrears'), unitCard(feature.key, '0.5')]);
  const customers: any[] = [];
  await inParallel([...Array(SUBSCRIPTIONS).keys()], 6, async (i) => void customers.push(await api.customer({ key: key(`crash${i}`) })));
  // One anchor for all: every first period ends at the same instant, so their invoices are issued together.
  const anchor = anchorEndingIn(20_000);
  const subscriptions: any[] = [];
  await inParallel(customers, 6, async (customer) => void subscriptions.push(await api.subscribe(customer.key, plan.key, { billing_anchor: anchor })));
  const expected = new Map<string, number>(subscriptions.map((s, i) => [s.id, (i % 5) + 1]));
  const periodEnd = Date.parse(subscriptions[0].current_period.to);
  await afterStart(subscriptions.reduce((a, b) => (Date.parse(a.active_from) > Date.parse(b.active_from) ? a : b)));
  await inParallel(subscriptions, 6, (s) => api.usage(s.customer.key, 'request', expected.get(s.id)!, { route: '/crash' }));
  assert.ok(periodEnd - Date.now() > 500, 'the setup (customers, subscriptions, usage) finished before the period ended');

  // Kill as soon as the first invoices appear (issuing takes a while for this many).
  await sleep(Math.max(0, periodEnd + 1_000 - Date.now()));
  const seenBeforeKill = await waitFor(async () => {
    const n = (await allInvoices(api)).length;
    return n > 0 ? n : undefined;
  }, 'the first invoices', 30_000);
  await crash(gateway);
  t.diagnostic(`${seenBeforeKill} of ${SUBSCRIPTIONS} invoices were listed just before the kill`);

  gateway = await spawnGateway(config, { dataDir });
  running.push(gateway);
  api = await BillingApi.connect(gateway.https);
  const invoices = await waitFor(async () => {
    const list = await allInvoices(api);
    return list.length >= SUBSCRIPTIONS ? list : undefined;
  }, `${SUBSCRIPTIONS} invoices after the restart`, 60_000);
  await sleep(1_500);
  const final = await allInvoices(api);
  assert.equal(final.length, SUBSCRIPTIONS, `no duplicates appeared (${seenBeforeKill} had been issued before the kill)`);
  assert.deepEqual(final, invoices);

  const bySubscription = new Map<string, any[]>();
  for (const invoice of final) bySubscription.set(invoice.subscription.id, [...(bySubscription.get(invoice.subscription.id) ?? []), invoice]);
  assert.equal(bySubscription.size, SUBSCRIPTIONS);
  for (const [id, list] of bySubscription) {
    assert.equal(list.length, 1, `subscription ${id} has one invoice`);
    const [invoice] = list;
    const quantity = expected.get(id)!;
    assert.deepEqual(invoice.lines.map((l: any) => [l.rate_card_key, l.quantity]), [['base', '1'], [feature.key, String(quantity)]]);
    assert.equal(invoice.totals.total, formatDecimal(new Decimal(invoice.lines[0].amount).plus(new Decimal(quantity).times('0.5'))));
  }
  assert.equal(new Set(final.map((i) => i.number)).size, SUBSCRIPTIONS, 'invoice numbers are unique');
});
