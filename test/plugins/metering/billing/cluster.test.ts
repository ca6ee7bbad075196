/**
 * Billing on two nodes sharing one PostgreSQL: entitlements and invoices are the same whichever node
 * answers, and each invoice is issued once although every node runs the scheduler. Customers, plans and subscriptions made on one node are served by the other;
 * one customer subscribed on both at once gets one subscription; usage sent to both nodes gives the
 * same entitlement access and invoices on both, each period issued once; a limit used up through one
 * node is enforced by the other.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { request, startGateway, startUpstream, type TestGateway } from '../../../helpers/gateway.ts';
import { postgresForSuite, postgresSkipReason } from '../../../helpers/postgres.ts';
import { waitFor } from '../../../helpers/support.ts';
import { afterStart, anchorEndingIn, BillingApi, billingConfig, unitCard } from './support.ts';

describe('billing on nodes sharing PostgreSQL', { skip: postgresSkipReason() }, () => {
  const suite = postgresForSuite();

  async function twoNodes(extra: Record<string, unknown> = {}): Promise<[BillingApi, BillingApi, TestGateway, TestGateway]> {
    const gateway = suite.pg.settings({ pg_schema: suite.schema('billing'), db_update_frequency: 0.2, worker_processes: 1 });
    const nodes: TestGateway[] = [];
    for (let i = 0; i < 2; i++) {
      const node = await startGateway({ ...billingConfig({ extra }), gateway });
      suite.track(() => node.stop());
      nodes.push(node);
    }
    return [await BillingApi.connect(nodes[0].https), await BillingApi.connect(nodes[1].https), nodes[0], nodes[1]];
  }

  test('a customer, plan and subscription made on one node are served by the other; one customer subscribed on both at once gets one subscription', async () => {
    const [a, b] = await twoNodes();
    const calls = await a.feature('api_calls');
    const plan = await a.activePlan([unitCard(calls.key, '1')]);
    const customer = await a.customer();
    assert.equal((await b.ok(200, b.get(`/customers/${customer.key}`))).id, customer.id);
    assert.equal((await b.ok(200, b.get(`/plans/${plan.id}`))).status, 'active');
    assert.equal((await b.ok(200, b.get(`/features/${calls.key}`))).id, calls.id);

    const body = { customer: { key: customer.key }, plan: { key: plan.key } };
    const answers = await Promise.all([a.post('/subscriptions', body), b.post('/subscriptions', body), a.post('/subscriptions', body), b.post('/subscriptions', body)]);
    assert.deepEqual(answers.map((r) => r.status).sort(), [201, 409, 409, 409], answers.map((r) => r.text).join('\n'));
    const made = answers.find((r) => r.status === 201)!.json();
    for (const api of [a, b]) {
      const listed = await api.ok(200, api.get(`/subscriptions?customer=${customer.key}`));
      assert.deepEqual(listed.data.map((s: any) => s.id), [made.id]);
    }
    // The customer's subscription is active: deleting it is refused on either node.
    assert.equal((await b.del(`/customers/${customer.key}`)).status, 409);
  });

  test('usage sent to both nodes: the same entitlement access and invoices on both, each period issued once', async () => {
    const [a, b] = await twoNodes();
    const calls = await a.feature('api_calls');
    const plan = await a.activePlan([{ ...unitCard(calls.key, '0.5'), entitlement: { type: 'metered', limit: '100' } }]);
    const customer = await a.customer();
    const subscription = await b.subscribe(customer.key, plan.key, { billing_anchor: anchorEndingIn(6_000) });
    await afterStart(subscription);
    await Promise.all([a.usage(customer.key, 'request', 7, { route: '/a' }), b.usage(customer.key, 'request', 4, { route: '/b' })]);

    const accessOn = async (api: BillingApi) => (await api.ok(200, api.get(`/customers/${customer.key}/entitlement-access`))).data.find((e: any) => e.feature_key === calls.key);
    for (const api of [a, b]) {
      const access = await waitFor(async () => {
        const entry = await accessOn(api);
        return entry?.usage === '11' ? entry : undefined;
      }, 'the usage of both nodes', 20_000);
      assert.equal(access.balance, '89');
      const upcoming = await api.ok(200, api.get(`/customers/${customer.key}/upcoming-invoice`));
      assert.equal(upcoming.totals.total, '5.5');
    }

    const [issued] = await a.invoicesWhen(customer.key, 1);
    assert.equal(issued.lines[0].quantity, '11');
    assert.equal(issued.totals.total, '5.5');
    // The period is issued once, though both nodes run the scheduler: the same single invoice on both.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    assert.deepEqual(await b.invoices(customer.key), [issued]);
    assert.deepEqual(await a.invoices(customer.key), [issued]);
    assert.deepEqual(await b.ok(200, b.get(`/invoices/${issued.id}`)), issued);
  });

  test('a limit used up through one node is enforced by the other', async () => {
    const upstream = await startUpstream();
    suite.track(() => upstream.close());
    const route = (name: string, path: string) => ({
      name,
      paths: [path],
      protocols: ['https'],
      plugins: [
        { name: 'oauth2', config: { enable_client_credentials: true, global_credentials: true } },
        { name: 'entitlement-enforcement', config: { feature: { key: 'cluster_access' } } },
      ],
    });
    const [a, b, nodeA, nodeB] = await twoNodes({
      services: [{ name: 'backend', url: upstream.url, routes: [route('api', '/api')] }],
      consumers: [{ username: 'acme', oauth2_credentials: [{ name: 'acme', client_id: 'acme-app', client_secret: 'acme-secret-0123456789' }] }],
    });
    await a.feature('api_calls', { key: 'cluster_access' });
    const plan = await a.activePlan([{ key: 'cluster_access', name: 'API access', feature_key: 'cluster_access', price: { type: 'unit', amount: '0.01' }, entitlement: { type: 'metered', limit: '3' } }]);
    const customer = await a.customer({ usage_attribution: { subject_keys: ['acme'] } });
    const subscription = await a.subscribe(customer.key, plan.key);
    const token = (
      await request(`${nodeA.https}/api/oauth2/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: 'grant_type=client_credentials&client_id=acme-app&client_secret=acme-secret-0123456789',
      })
    ).json().access_token;
    const call = (node: TestGateway) => request(`${node.https}/api/hello`, { headers: { authorization: `Bearer ${token}` } });

    // Both nodes admit the customer (B learns of the subscription made on A).
    for (const node of [nodeA, nodeB]) {
      const first = await waitFor(async () => {
        const r = await call(node);
        return r.status === 200 ? r : undefined;
      }, 'access on both nodes', 20_000);
      assert.equal(first.headers['x-usage-limit'], '3');
    }
    await afterStart(subscription);
    await a.usage('acme', 'request', 3, { route: '/api' });
    const refused = await waitFor(async () => {
      const r = await call(nodeB);
      return r.status === 429 ? r : undefined;
    }, 'node B refusing the used-up limit', 20_000);
    assert.equal(refused.headers['x-usage-remaining'], '0');
    assert.ok(Number(refused.headers['retry-after']) > 0);
    assert.equal((await call(nodeA)).status, 429);
    assert.equal((await b.ok(200, b.get(`/customers/${customer.key}/entitlement-access`))).data[0].has_access, false);
  });
});
