/**
 * The official `@openmeter/sdk` against the gateway: invoices (the upcoming `gathering` invoice, then
 * the issued ones, listed and read) checked against the v3 API's view of the same invoices, the
 * invoice actions Tollgate does not have refused with 501, and the info area (currencies, progress).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { OpenMeter } from '@openmeter/sdk';
import type { TestGateway } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';
import { afterStart, anchorEndingIn, flatCard, startBillingGateway, unitCard, type BillingApi } from './billing/support.ts';
import { closeSdkClients, sdkClient, sdkError } from './openmeter-sdk-support.ts';

let gw: TestGateway;
let v3: BillingApi;
let client: OpenMeter;
before(async () => {
  ({ gateway: gw, api: v3 } = await startBillingGateway());
  client = sdkClient(gw.https, v3.token);
});
after(async () => {
  await gw.stop();
  await closeSdkClients();
});

test('invoices: the upcoming one while the period runs, then the issued ones, as v3 lists them', async () => {
  await v3.feature('api_calls', { key: 'calls' });
  await v3.activePlan([flatCard('fee', '5'), unitCard('calls', '0.5')], { key: 'minutely', pro_rating_enabled: false });
  const customer = (await client.customers.create({ key: 'globex', name: 'Globex', currency: 'USD' }))!;
  const subscription = (await client.subscriptions.create({ customerKey: 'globex', plan: { key: 'minutely' }, billingAnchor: new Date(anchorEndingIn(4000)) }))!;
  await afterStart({ active_from: subscription.activeFrom.toISOString() });
  await v3.usage('globex', 'request', 2, { route: 'r' });

  const gathering = (await client.billing.invoices.list({ customers: [customer.id], statuses: ['gathering'] }))!;
  const upcoming = (await v3.get('/customers/globex/upcoming-invoice')).json();
  assert.deepEqual(gathering.items.map((i) => [i.id, i.status]), [[upcoming.id, 'gathering']]);

  const hasUsage = (i: any) => i.lines.some((l: any) => l.feature_key === 'calls');
  const issued = await waitFor(async () => {
    const list = await v3.invoices('globex');
    return list.some(hasUsage) ? list : undefined;
  }, 'the usage invoice of the first period', 20_000);
  const listed = (await client.billing.invoices.list({ customers: [customer.id], statuses: ['issued'] }))!;
  // In number order on both; invoices issued between the two reads come last.
  assert.deepEqual(listed.items.slice(0, issued.length).map((i) => [i.id, i.number, i.totals.total]), issued.map((i) => [i.id, i.number, i.totals.total]));
  const usageInvoice = issued.find(hasUsage);
  const read = (await client.billing.invoices.get(usageInvoice.id))!;
  assert.equal(read.status, 'issued');
  assert.equal(read.totals.total, usageInvoice.totals.total);
  assert.equal(read.customer.id, customer.id);
  const line = read.lines!.find((l: any) => l.featureKey === 'calls') as any;
  assert.equal(line.quantity, '2');
  assert.equal(line.totals.amount, '1');
  assert.ok(read.issuedAt instanceof Date);

  const refused = await sdkError(client.billing.invoices.approve(read.id), 501);
  assert.match(refused.message, /never changes/);
  await sdkError(client.billing.invoices.get('01J0000000000000000000000Z'), 404);
});

test('info: the currencies plans take, and the progress of a query', async () => {
  const currencies = (await client.info.listCurrencies())!;
  const usd = currencies.find((c) => c.code === 'USD');
  assert.deepEqual(usd, { code: 'USD', name: 'US Dollar', symbol: '$', subunits: 100 });
  assert.equal(currencies.find((c) => c.code === 'JPY')!.subunits, 1);
  assert.ok(!currencies.some((c) => c.code === 'XAU'), 'no gold: only the fiat codes plans accept');
  const progress = (await client.info.getProgress('client-1'))!;
  assert.deepEqual([progress.success, progress.failed, progress.total], [0, 0, 0]);
});
