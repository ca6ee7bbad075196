/**
 * The official `@openmeter/sdk` against the gateway: invoices (the upcoming `gathering` invoice, then
 * the issued ones, listed and read) checked against the v3 API's view of the same invoices, the
 * invoice actions Tollgate does not have refused with 501, and the info area (currencies, progress).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { waitFor } from '../../helpers/support.ts';
import { afterStart, anchorEndingIn, flatCard, unitCard } from './billing/support.ts';
import { billingSdkSuite, sdkError } from './openmeter-sdk-support.ts';

const suite = billingSdkSuite();

test('invoices: the upcoming one while the period runs, then the issued ones, as v3 lists them', async () => {
  await suite.v3.feature('api_calls', { key: 'calls' });
  await suite.v3.activePlan([flatCard('fee', '5'), unitCard('calls', '0.5')], { key: 'minutely', pro_rating_enabled: false });
  const customer = (await suite.client.customers.create({ key: 'globex', name: 'Globex', currency: 'USD' }))!;
  const subscription = (await suite.client.subscriptions.create({ customerKey: 'globex', plan: { key: 'minutely' }, billingAnchor: new Date(anchorEndingIn(4000)) }))!;
  await afterStart({ active_from: subscription.activeFrom.toISOString() });
  await suite.v3.usage('globex', 'request', 2, { route: 'r' });

  const gathering = (await suite.client.billing.invoices.list({ customers: [customer.id], statuses: ['gathering'] }))!;
  const upcoming = (await suite.v3.get('/customers/globex/upcoming-invoice')).json();
  assert.deepEqual(gathering.items.map((i) => [i.id, i.status]), [[upcoming.id, 'gathering']]);

  const hasUsage = (i: any) => i.lines.some((l: any) => l.feature_key === 'calls');
  const issued = await waitFor(async () => {
    const list = await suite.v3.invoices('globex');
    return list.some(hasUsage) ? list : undefined;
  }, 'the usage invoice of the first period', 20_000);
  const listed = (await suite.client.billing.invoices.list({ customers: [customer.id], statuses: ['issued'] }))!;
  // In number order on both; invoices issued between the two reads come last.
  assert.deepEqual(listed.items.slice(0, issued.length).map((i) => [i.id, i.number, i.totals.total]), issued.map((i) => [i.id, i.number, i.totals.total]));
  const usageInvoice = issued.find(hasUsage);
  const read = (await suite.client.billing.invoices.get(usageInvoice.id))!;
  assert.equal(read.status, 'issued');
  assert.equal(read.totals.total, usageInvoice.totals.total);
  assert.equal(read.customer.id, customer.id);
  const line = read.lines!.find((l: any) => l.featureKey === 'calls') as any;
  assert.equal(line.quantity, '2');
  assert.equal(line.totals.amount, '1');
  assert.ok(read.issuedAt instanceof Date);

  const refused = await sdkError(suite.client.billing.invoices.approve(read.id), 501);
  assert.match(refused.message, /never changes/);
  await sdkError(suite.client.billing.invoices.get('01J0000000000000000000000Z'), 404);
});

test('info: the currencies plans take, and the progress of a query', async () => {
  const currencies = (await suite.client.info.listCurrencies())!;
  const usd = currencies.find((c) => c.code === 'USD');
  assert.deepEqual(usd, { code: 'USD', name: 'US Dollar', symbol: '$', subunits: 100 });
  assert.equal(currencies.find((c) => c.code === 'JPY')!.subunits, 1);
  assert.ok(!currencies.some((c) => c.code === 'XAU'), 'no gold: only the fiat codes plans accept');
  const progress = (await suite.client.info.getProgress('client-1'))!;
  assert.deepEqual([progress.success, progress.failed, progress.total], [0, 0, 0]);
});
