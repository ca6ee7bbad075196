/**
 * The catalogue's customer cases (C01–C13): creation and validation, uniqueness of keys and usage
 * subjects among live customers, soft delete, coupling to subscriptions, and usage attribution by
 * subject (key, or subject keys) — against a real gateway with the billing API under its metering route.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type TestGateway } from '../../../helpers/gateway.ts';
import { waitFor } from '../../../helpers/support.ts';
import { afterStart, assertProblem, BillingApi, key, unitCard, startBillingGateway } from './support.ts';

const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

let gateway: TestGateway;
let api: BillingApi;
before(async () => ({ gateway, api } = await startBillingGateway()));
after(() => gateway?.stop());

/** A published plan with a metered entitlement on api_calls (limit 100) priced by unit. */
async function meteredPlan(): Promise<{ planKey: string; featureKey: string }> {
  const feature = await api.feature('api_calls');
  const plan = await api.activePlan([unitCard(feature.key, '1', { entitlement: { type: 'metered', limit: '100' } })]);
  return { planKey: plan.key, featureKey: feature.key };
}

async function usageOf(customerKey: string, featureKey: string, expected: string): Promise<string> {
  return waitFor(async () => {
    const access = await api.ok(200, api.get(`/customers/${customerKey}/entitlement-access`));
    const usage = access.data.find((e: any) => e.feature_key === featureKey)?.usage;
    return usage === expected ? usage : undefined;
  }, `usage ${expected} of ${customerKey}`, 20_000);
}

describe('customers', () => {
  test('C01 POST {key, name} answers 201 with a ULID id', async () => {
    const k = key('c01');
    const res = await api.post('/customers', { key: k, name: 'Acme' });
    assert.equal(res.status, 201, res.text);
    const body = res.json();
    assert.match(body.id, ULID);
    assert.equal(body.key, k);
    assert.equal(body.name, 'Acme');
    assert.deepEqual(body.usage_attribution, { subject_keys: [] });
    assert.equal((await api.ok(200, api.get(`/customers/${body.id}`))).key, k);
    assert.equal((await api.ok(200, api.get(`/customers/${k}`))).id, body.id);
  });

  test('C02 POST without name answers 400 naming name (rule required)', async () => {
    const problem = assertProblem(await api.post('/customers', { key: key('c02') }), 400, 'name');
    assert.ok(problem.invalid_parameters.some((p: any) => p.field === 'name' && p.rule === 'required'));
  });

  test('C03 a live key cannot be taken twice: 409', async () => {
    const k = key('c03');
    await api.customer({ key: k });
    assertProblem(await api.post('/customers', { key: k, name: 'Again' }), 409);
  });

  test('concurrent creates with one key, or one subject key: exactly one wins each time', async () => {
    const k = key('race');
    const byKey = await Promise.all(Array.from({ length: 10 }, () => api.post('/customers', { key: k, name: 'Racer' })));
    assert.deepEqual(byKey.map((r) => r.status).sort(), [201, ...Array(9).fill(409)]);
    const subject = key('racesubj');
    const bySubject = await Promise.all(Array.from({ length: 10 }, () => api.post('/customers', { key: key('r'), name: 'Racer', usage_attribution: { subject_keys: [subject] } })));
    assert.deepEqual(bySubject.map((r) => r.status).sort(), [201, ...Array(9).fill(409)]);
  });

  test('C04 a subject key of a live customer cannot be another customer\'s: 409', async () => {
    const subject = key('s1');
    await api.customer({ usage_attribution: { subject_keys: [subject] } });
    const res = await api.post('/customers', { key: key('c04'), name: 'B', usage_attribution: { subject_keys: [subject] } });
    assertProblem(res, 409);
    assert.match(res.text, new RegExp(subject));
  });

  test('C05 a key that is another customer\'s subject key: 409 "overlaps with subject"', async () => {
    const subject = key('x');
    await api.customer({ usage_attribution: { subject_keys: [subject] } });
    const res = await api.post('/customers', { key: subject, name: 'B' });
    assertProblem(res, 409);
    assert.match(res.text, /overlaps with subject/);
  });

  test('C06 a non-fiat currency is refused: 400 "must be fiat"; an unknown one too', async () => {
    const res = await api.post('/customers', { key: key('c06'), name: 'Gold', currency: 'XAU' });
    assertProblem(res, 400, 'currency');
    assert.match(res.text, /must be fiat/);
    assertProblem(await api.post('/customers', { key: key('c06'), name: 'Z', currency: 'ZZZ' }), 400, 'currency');
    assert.equal((await api.customer({ currency: 'EUR' })).currency, 'EUR');
  });

  test('C07 a deleted customer\'s key (and subjects) can be used again: 201', async () => {
    const k = key('c07');
    const subject = key('s7');
    const first = await api.customer({ key: k, usage_attribution: { subject_keys: [subject] } });
    await api.ok(204, api.del(`/customers/${k}`));
    assertProblem(await api.get(`/customers/${k}`), 404);
    const deleted = await api.ok(200, api.get(`/customers/${first.id}`));
    assert.ok(deleted.deleted_at, 'the deleted customer is still readable by id, with deleted_at');
    const second = await api.customer({ key: k, usage_attribution: { subject_keys: [subject] } });
    assert.notEqual(second.id, first.id);
  });

  test('C08 PUT on a deleted customer answers 410', async () => {
    const c = await api.customer();
    await api.ok(204, api.del(`/customers/${c.id}`));
    assertProblem(await api.put(`/customers/${c.id}`, { name: 'Renamed' }), 410);
  });

  test('PUT keeps the key, sets the name, clears an omitted description and keeps omitted subject keys', async () => {
    const subject = key('sput');
    const c = await api.customer({ description: 'old', usage_attribution: { subject_keys: [subject] }, currency: 'USD' });
    const updated = await api.ok(200, api.put(`/customers/${c.id}`, { name: 'New name' }));
    assert.equal(updated.key, c.key);
    assert.equal(updated.name, 'New name');
    assert.equal(updated.description, undefined);
    assert.deepEqual(updated.usage_attribution.subject_keys, [subject]);
    assert.equal(updated.currency, 'USD');
  });

  test('C09 with an active subscription, PUT changing subject_keys is rejected (400); the same keys pass', async () => {
    const { planKey } = await meteredPlan();
    const c = await api.customer({ usage_attribution: { subject_keys: ['a', 'b'].map((s) => key(s)) } });
    await api.subscribe(c.key, planKey);
    const reordered = [...c.usage_attribution.subject_keys].reverse();
    assertProblem(await api.put(`/customers/${c.key}`, { name: c.name, usage_attribution: { subject_keys: reordered } }), 400, 'usage_attribution');
    await api.ok(200, api.put(`/customers/${c.key}`, { name: 'Same subjects', usage_attribution: c.usage_attribution }));
  });

  test('C10 with an active subscription, DELETE is refused: 409 (Tollgate\'s contract; OpenMeter answers 400)', async () => {
    const { planKey } = await meteredPlan();
    const c = await api.customer();
    const s = await api.subscribe(c.key, planKey);
    const res = await api.del(`/customers/${c.key}`);
    assertProblem(res, 409);
    assert.match(res.text, /active subscription/);
    await api.ok(200, api.post(`/subscriptions/${s.id}/cancel`, {}));
    await api.ok(204, api.del(`/customers/${c.key}`));
  });

  test('C11 a customer without subject keys is attributed the events whose subject is its key', async () => {
    const { planKey, featureKey } = await meteredPlan();
    const c = await api.customer();
    const s = await api.subscribe(c.key, planKey);
    await afterStart(s);
    await api.usage(c.key, 'request', 2, { route: '/a' });
    await api.usage(key('other'), 'request', 1, { route: '/a' });
    assert.equal(await usageOf(c.key, featureKey, '2'), '2');
  });

  test('C12 three subject keys, one event each: usage 3', async () => {
    const { planKey, featureKey } = await meteredPlan();
    const subjects = ['x', 'y', 'z'].map((s) => key(s));
    const c = await api.customer({ usage_attribution: { subject_keys: subjects } });
    const s = await api.subscribe(c.key, planKey);
    await afterStart(s);
    for (const subject of subjects) await api.usage(subject, 'request', 1, { route: '/a' });
    // The key itself is not a usage subject once subject keys are listed.
    await api.usage(c.key, 'request', 1, { route: '/a' });
    assert.equal(await usageOf(c.key, featureKey, '3'), '3');
  });

  test('C13 an identifier that is A\'s key and B\'s subject key resolves to A', async () => {
    const x = key('x');
    const a = await api.customer({ key: x, usage_attribution: { subject_keys: [key('a')] } });
    const b = await api.customer({ usage_attribution: { subject_keys: [x] } });
    const answer = await api.ok(200, api.post('/entitlement-access/query', { customer: { keys: [x] } }));
    assert.equal(answer.data.length, 1);
    assert.equal(answer.data[0].customer.id, a.id);
    assert.notEqual(answer.data[0].customer.id, b.id);
  });

  test('lists are paged {data, meta.page{number, size, total}}; bad pages are 400', async () => {
    const page = await api.ok(200, api.get('/customers?page[size]=2&page[number]=1'));
    assert.equal(page.data.length, 2);
    assert.equal(page.meta.page.size, 2);
    assert.ok(page.meta.page.total >= 2);
    const problem = assertProblem(await api.get('/customers?page[number]=0'), 400, 'page[number]');
    assert.match(JSON.stringify(problem), /page has to be at least 1/);
  });
});
