/**
 * The official `@openmeter/sdk` against the gateway: subjects, customers, subscriptions and
 * entitlements (v1 by subject, v2 by customer), each answer checked against the v3 API's view of the
 * same objects — one domain, two HTTP shapes.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { waitFor } from '../../helpers/support.ts';

import { billingSdkSuite, sdkError } from './openmeter-sdk-support.ts';

const suite = billingSdkSuite();

test('subjects: upserted with display names, read, listed with the subjects of events, deleted', async () => {
  const [upserted] = (await suite.client.subjects.upsert([{ key: 'sub-a', displayName: 'Subject A', metadata: { tier: 'gold' } }]))!;
  assert.equal(upserted.key, 'sub-a');
  assert.equal(upserted.displayName, 'Subject A');
  assert.ok(upserted.createdAt instanceof Date);
  const again = (await suite.client.subjects.upsert([{ key: 'sub-a', displayName: 'Renamed' }]))!;
  assert.equal(again[0].id, upserted.id, 'an upsert of a known key keeps its id');
  assert.equal(again[0].metadata, null, 'and replaces its metadata');
  assert.equal((await suite.client.subjects.get('sub-a'))!.displayName, 'Renamed');

  await suite.v3.ingestOk([{ specversion: '1.0', id: 'e-sub-b', source: 'test', type: 'request', subject: 'sub-b', data: { route: 'r' } }]);
  await waitFor(async () => (await suite.client.subjects.list())!.some((s) => s.key === 'sub-b'), 'the subject of an event listed');
  assert.deepEqual((await suite.client.subjects.list())!.map((s) => [s.key, s.displayName]), [['sub-a', 'Renamed'], ['sub-b', null]]);
  assert.equal((await suite.client.subjects.get('sub-b'))!.key, 'sub-b', 'a subject only events know is readable');

  await suite.client.subjects.delete('sub-a');
  await sdkError(suite.client.subjects.get('sub-a'), 404);
  await sdkError(suite.client.subjects.upsert([{ key: '' }]), 400);
});

test('customers: created, read, listed, updated and deleted through the SDK, the same customer on v3', async () => {
  const created = (await suite.client.customers.create({
    key: 'acme', name: 'Acme', primaryEmail: 'billing@acme.test', currency: 'USD', usageAttribution: { subjectKeys: ['acme-app'] }, metadata: { region: 'eu' },
  }))!;
  const onV3 = (await suite.v3.get('/customers/acme')).json();
  assert.equal(created.id, onV3.id);
  assert.deepEqual(created.usageAttribution, { subjectKeys: ['acme-app'] });
  assert.deepEqual(onV3.usage_attribution, { subject_keys: ['acme-app'] });
  assert.deepEqual(onV3.labels, { region: 'eu' });
  assert.equal(onV3.primary_email, 'billing@acme.test');
  assert.ok(created.createdAt instanceof Date);

  assert.equal((await suite.client.customers.get(created.id))!.key, 'acme', 'by id');
  const listed = (await suite.client.customers.list({ key: 'acme' }))!;
  assert.deepEqual([listed.totalCount, listed.items.map((c) => c.id)], [1, [created.id]]);

  const updated = (await suite.client.customers.update('acme', { name: 'Acme Corp', usageAttribution: { subjectKeys: ['acme-app', 'acme-cli'] } }))!;
  assert.equal(updated.key, 'acme', 'the key is kept');
  assert.equal((await suite.v3.get('/customers/acme')).json().name, 'Acme Corp');
  assert.deepEqual((await suite.v3.get('/customers/acme')).json().usage_attribution.subject_keys, ['acme-app', 'acme-cli']);

  const keyless = (await suite.client.customers.create({ name: 'No key' }))!;
  assert.equal(keyless.key, keyless.id, 'a customer created without a key is known by its id');

  const duplicate = await sdkError(suite.client.customers.create({ key: 'acme', name: 'Again' }), 409);
  assert.match(duplicate.message, /acme/);
  const invalid = await sdkError(suite.client.customers.create({ key: 'x', name: 'X', currency: 'ZZZ' as any }), 400);
  assert.equal((invalid.getField('invalidParameters') as { field: string }[])[0].field, 'currency');

  const twice = await sdkError(suite.client.customers.create({ key: 'y', name: 'Y', usageAttribution: { subjectKeys: ['s', 's'] } }), 400);
  assert.deepEqual((twice.getField('invalidParameters') as { field: string }[]).map((p) => p.field), ['usageAttribution.subjectKeys[1]'], 'fields in v1\'s names');

  await suite.client.customers.delete(keyless.id);
  assert.ok((await suite.v3.get(`/customers/${keyless.id}`)).json().deleted_at, 'deleted on v3 too');
});

test('subscriptions and entitlements: a plan subscribed through the SDK grants what v3 shows, usage counted against the limit', async () => {
  assert.equal((await suite.v3.post('/features', { key: 'calls', name: 'Calls', meter: { key: 'api_calls' } })).status, 201);
  assert.equal((await suite.v3.post('/features', { key: 'sso', name: 'SSO' })).status, 201);
  const plan = (await suite.v3.post('/plans', {
    key: 'pro', name: 'Pro', currency: 'USD', billing_cadence: 'P1M',
    phases: [{ key: 'main', name: 'Main', duration: null, rate_cards: [
      { key: 'calls', name: 'Calls', feature_key: 'calls', price: { type: 'unit', amount: '0.01' }, entitlement: { type: 'metered', limit: '10', usage_period: 'P1M' } },
      { key: 'sso', name: 'SSO', feature_key: 'sso', price: { type: 'free' }, entitlement: { type: 'boolean' } },
    ] }],
  })).json();
  assert.equal((await suite.v3.post(`/plans/${plan.id}/publish`)).status, 200);

  const subscription = (await suite.client.subscriptions.create({ customerKey: 'acme', plan: { key: 'pro' } }))!;
  const onV3 = (await suite.v3.get(`/subscriptions/${subscription.id}`)).json();
  assert.equal(subscription.customerId, onV3.customer_id);
  assert.deepEqual(subscription.plan, { id: plan.id, key: 'pro', version: 1 });
  assert.equal(subscription.status, 'active');
  assert.equal(subscription.activeFrom.toISOString(), new Date(onV3.active_from).toISOString());
  const expanded = (await suite.client.subscriptions.get(subscription.id))!;
  assert.equal(expanded.id, subscription.id);
  assert.deepEqual(expanded.phases.map((p) => [p.key, p.items.map((i) => i.key)]), [['main', ['calls', 'sso']]], 'the phase and rate cards it bought');
  assert.deepEqual(expanded.phases[0].items[0].price, { type: 'unit', amount: '0.01' });
  assert.equal((await suite.client.customers.get('acme'))!.currentSubscriptionId, subscription.id);
  const expandedList = (await suite.client.customers.list({ key: 'acme', expand: ['subscriptions'] }))!;
  assert.deepEqual(expandedList.items[0].subscriptions!.map((s) => s.id), [subscription.id]);
  const ofCustomer = (await suite.client.customers.listSubscriptions('acme'))!;
  assert.deepEqual(ofCustomer.items.map((s) => s.id), [subscription.id]);

  const now = new Date().toISOString();
  await suite.client.events.ingest([1, 2, 3].map((n) => ({ id: `call-${n}`, type: 'request', subject: 'acme-cli', time: now, data: { route: 'r' } })) as any);
  const access = await waitFor(
    async () => (await suite.v3.get('/customers/acme/entitlement-access')).json().data.find((v: any) => v.feature_key === 'calls'),
    'usage counted on v3', 5000, (v) => v?.usage === '3',
  );
  const v1Access = (await suite.client.customers.getAccess('acme'))!;
  assert.deepEqual(v1Access.entitlements.calls, { hasAccess: true, usage: 3, balance: 7, overage: 0, totalAvailableGrantAmount: 10 });
  assert.equal(access.balance, '7');
  assert.deepEqual(v1Access.entitlements.sso, { hasAccess: true });

  // v1: by subject; v2: by customer; both the same entitlement, its id stable.
  const bySubject = (await suite.client.entitlementsV1.value('acme-app', 'calls'))!;
  assert.deepEqual([bySubject.hasAccess, bySubject.usage, bySubject.balance], [true, 3, 7]);
  assert.deepEqual([(await suite.client.customers.entitlementsV1.value('acme', 'calls'))!.usage], [3]);
  const v2List = (await suite.client.customers.entitlements.list('acme'))!;
  assert.deepEqual(v2List.items.map((e: any) => [e.featureKey, e.type, e.customerKey]), [['calls', 'metered', 'acme'], ['sso', 'boolean', 'acme']]);
  const metered = v2List.items[0] as any;
  assert.equal(metered.issueAfterReset, 10);
  assert.equal(metered.usagePeriod.interval, 'P1M');
  assert.equal((await suite.client.entitlementsV1.get(metered.id))!.id, metered.id);
  assert.equal(((await suite.client.customers.entitlements.get('acme', 'calls')) as any).id, metered.id);
  assert.deepEqual((await suite.client.entitlementsV1.list() as any[]).map((e) => e.featureKey), ['calls', 'sso']);
  assert.equal((await suite.client.entitlements.list())!.totalCount, 2);
  assert.equal(((await suite.client.customers.entitlements.value('acme', metered.id)) as any).usage, 3);

  await sdkError(suite.client.entitlementsV1.value('acme-app', 'calls', { time: new Date(Date.now() - 3_600_000) }), 404);
  const later = (await suite.client.entitlementsV1.value('acme-app', 'calls', { time: new Date(Date.now() + 1000) }))!;
  assert.equal(later.usage, 3, 'the value at a given time');

  const history = (await suite.client.customers.entitlements.history('acme', 'calls', 'DAY'))!;
  assert.equal(history.windowedHistory.reduce((n, w) => n + w.usage, 0), 3);
  assert.equal(history.windowedHistory[0].balanceAtStart, 10);
  const hourly = (await suite.client.customers.entitlements.history('acme', 'calls', 'MINUTE', { query: { from: new Date(Date.now() - 120_000), to: new Date(Date.now() + 60_000) } } as any))!;
  assert.equal(hourly.windowedHistory.reduce((n, w) => n + w.usage, 0), 3);
  assert.equal(hourly.windowedHistory.at(-1)!.balanceAtStart, 7, 'the last window starts after the calls');
  const kolkata = (await suite.client.customers.entitlements.history('acme', 'calls', 'HOUR', { query: { windowTimeZone: 'Asia/Kolkata', to: new Date(Date.now() + 2 * 3_600_000) } } as any))!;
  assert.ok(kolkata.windowedHistory.length >= 2);
  assert.ok(kolkata.windowedHistory.slice(1).every((w) => w.period.from.getUTCMinutes() === 30 && w.period.from.getUTCSeconds() === 0), 'hours of Kolkata start at :30 UTC');
  assert.equal(kolkata.windowedHistory.reduce((n, w) => n + w.usage, 0), 3);
  await sdkError(suite.client.customers.entitlements.history('acme', 'calls', 'HOUR', { query: { windowTimeZone: 'Mars/Olympus' } } as any), 400);

  // Tollgate grants through plans: writing entitlements directly is 501, with what to do instead.
  const refused = await sdkError(suite.client.customers.entitlements.create('acme', { type: 'boolean', featureKey: 'sso' } as any), 501);
  assert.match(refused.message, /plan/);
  assert.deepEqual(await suite.client.entitlementsV1.grants.list('acme-app', 'calls'), []);
  await sdkError(suite.client.entitlementsV1.value('nobody', 'calls'), 404);
  assert.deepEqual(await suite.client.customers.entitlementsV1.value('acme', 'nope').catch((e) => e.status), 404);
});

test('subscriptions: changed to another plan and canceled through the SDK, as v3 sees them', async () => {
  const base = (await suite.v3.post('/plans', {
    key: 'basic', name: 'Basic', currency: 'USD', billing_cadence: 'P1M',
    phases: [{ key: 'main', name: 'Main', duration: null, rate_cards: [{ key: 'sso', name: 'SSO', feature_key: 'sso', price: { type: 'free' }, entitlement: { type: 'boolean' } }] }],
  })).json();
  await suite.v3.post(`/plans/${base.id}/publish`);
  const current = (await suite.client.customers.get('acme'))!.currentSubscriptionId!;
  const { current: ended, next } = (await suite.client.subscriptions.change(current, { timing: 'immediate', plan: { key: 'basic' } }))!;
  assert.equal(ended.id, current);
  assert.ok(ended.activeTo instanceof Date);
  assert.equal(next.plan!.key, 'basic');
  assert.equal((await suite.v3.get(`/subscriptions/${next.id}`)).json().plan.key, 'basic');
  const access = (await suite.client.customers.getAccess('acme'))!;
  assert.deepEqual(Object.keys(access.entitlements), ['sso'], 'the new plan\'s entitlements');

  const canceled = (await suite.client.subscriptions.cancel(next.id, { timing: 'next_billing_cycle' }))!;
  assert.equal(canceled.status, 'canceled');
  assert.equal((await suite.v3.get(`/subscriptions/${next.id}`)).json().status, 'canceled');
  assert.equal((await suite.client.subscriptions.unscheduleCancelation(next.id))!.status, 'active');
  await sdkError(suite.client.subscriptions.create({ customerKey: 'acme', plan: { key: 'basic' }, timing: 'next_billing_cycle' }), 400);
  await sdkError(suite.client.subscriptions.delete(next.id), 501);
});
