/**
 * The `entitlement-enforcement` plugin end to end: a real upstream behind a route with oauth2 and the
 * plugin, customers, plans and subscriptions made through the billing API, usage posted as events.
 * Proves: 403 for an unknown customer and for one without the feature, 200 with X-Usage-Limit and
 * X-Usage-Remaining (the request itself counted) while under a metered limit, 429 with Retry-After as soon as the usage reaching the
 * limit is committed, 200 again at the next usage period; the header lookup; deny_unknown_customers.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { request, startGateway, startUpstream, TEST_DATABASE, TEST_WORKERS, type Reply, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';
import { anchorEndingIn, afterStart, BillingApi, billingConfig, sleep } from '../metering/billing/support.ts';

const FEATURE = 'api_access';
const FLAG = 'beta_flag';

let gateway: TestGateway;
let upstream: Upstream;
let api: BillingApi;

const credential = (name: string) => ({ name, client_id: `${name}-app`, client_secret: `${name}-secret-0123456789` });

function enforcedRoute(name: string, path: string, config: Record<string, unknown>): Record<string, unknown> {
  return {
    name,
    paths: [path],
    protocols: ['https'],
    plugins: [
      { name: 'oauth2', config: { enable_client_credentials: true, global_credentials: true } },
      { name: 'entitlement-enforcement', config },
    ],
  };
}

async function tokenOf(name: string): Promise<string> {
  const res = await request(`${gateway.https}/api/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: `grant_type=client_credentials&client_id=${name}-app&client_secret=${name}-secret-0123456789`,
  });
  assert.equal(res.status, 200, res.text);
  return res.json().access_token;
}

function call(path: string, token: string, headers: Record<string, string> = {}): Promise<Reply> {
  return request(`${gateway.https}${path}`, { headers: { authorization: `Bearer ${token}`, ...headers } });
}

before(async () => {
  upstream = await startUpstream();
  gateway = await startGateway(
    billingConfig({
      extra: {
        services: [
          {
            name: 'backend',
            url: upstream.url,
            routes: [
              enforcedRoute('api', '/api', { feature: { key: FEATURE } }),
              enforcedRoute('by-header', '/by-header', { feature: { key: FEATURE }, customer: { look_up_value_in: 'header', field: 'X-Customer' } }),
              enforcedRoute('open-door', '/open-door', { feature: { key: FEATURE }, deny_unknown_customers: false }),
              enforcedRoute('beta', '/beta', { feature: { key: FLAG } }),
            ],
          },
        ],
        consumers: ['acme', 'stranger', 'basic'].map((username) => ({ username, oauth2_credentials: [credential(username)] })),
      },
    }),
  );
  api = await BillingApi.connect(gateway.https);
});
after(async () => {
  await gateway?.stop();
  await upstream?.close();
});

describe('entitlement-enforcement', () => {
  let acmeToken: string;
  let subscription: any;

  before(async () => {
    await api.feature('api_calls', { key: FEATURE });
    await api.feature(null, { key: FLAG });
    const pro = await api.activePlan([
      { key: FEATURE, name: 'API access', feature_key: FEATURE, price: { type: 'unit', amount: '0.01' }, entitlement: { type: 'metered', limit: '3' } },
      { key: FLAG, name: 'Beta', feature_key: FLAG, price: { type: 'free' }, entitlement: { type: 'boolean' } },
    ]);
    const basicPlan = await api.activePlan([{ key: 'base', name: 'Base', price: { type: 'flat', amount: '1' } }]);
    await api.customer({ key: 'acme-corp', usage_attribution: { subject_keys: ['acme'] } });
    await api.customer({ key: 'basic-corp', usage_attribution: { subject_keys: ['basic'] } });
    subscription = await api.subscribe('acme-corp', pro.key, { billing_anchor: anchorEndingIn(12_000) });
    await api.subscribe('basic-corp', basicPlan.key);
    acmeToken = await tokenOf('acme');
  });

  test('an unknown customer gets 403; with deny_unknown_customers: false it passes', async () => {
    const token = await tokenOf('stranger');
    const res = await call('/api/hello', token);
    assert.equal(res.status, 403);
    assert.match(res.json().message, /customer/);
    assert.equal((await call('/open-door/hello', token)).status, 200);
  });

  test('a customer without the feature gets 403', async () => {
    const token = await tokenOf('basic');
    const res = await waitFor(async () => {
      const r = await call('/api/hello', token);
      return r.status === 403 && /feature/.test(r.text) ? r : undefined;
    }, 'the subscription in the cache', 20_000);
    assert.match(res.json().message, /feature_unavailable/);
    assert.equal((await call('/beta/x', token)).status, 403);
  });

  test('a boolean entitlement lets the request through', async () => {
    const res = await waitFor(async () => {
      const r = await call('/beta/x', acmeToken);
      return r.status === 200 ? r : undefined;
    }, 'access to the flag', 20_000);
    assert.equal(res.headers['x-usage-limit'], undefined);
  });

  test('usage posted → 429 at the limit → reset at the next usage period → 200', async () => {
    const first = await waitFor(async () => {
      const r = await call('/api/hello', acmeToken);
      return r.status === 200 ? r : undefined;
    }, 'metered access', 20_000);
    assert.equal(first.headers['x-usage-limit'], '3');
    // What remains once this request is counted (this route meters nothing, so it gives its place back after).
    assert.equal(first.headers['x-usage-remaining'], '2');
    assert.equal(upstream.requests.at(-1)?.path, '/hello');

    await afterStart(subscription);
    // Committed usage counts at once in the process that commits it (the writer's commit hook), no re-read
    // needed. On a shared store the aggregator counts it a moment after the 202: on a node of several
    // workers (TOLLGATE_TEST_WORKERS) another worker may answer, and re-reads usage every second; on
    // PostgreSQL (TOLLGATE_TEST_POSTGRES) the aggregator folds the journal in the background.
    const counted = (what: string, probe: () => Promise<Reply>, done: (r: Reply) => boolean) =>
      TEST_WORKERS || TEST_DATABASE === 'postgres'
        ? waitFor(probe, what, 20_000, done)
        : probe();
    await api.usage('acme', 'request', 2, { route: '/api' });
    const two = await counted('usage of 2', () => call('/api/hello', acmeToken), (r) => r.headers['x-usage-remaining'] === '0');
    assert.equal(two.status, 200);
    assert.equal(two.headers['x-usage-remaining'], '0');

    await api.usage('acme', 'request', 1, { route: '/api' });
    const limited = await counted('the limit', () => call('/api/hello', acmeToken), (r) => r.status === 429);
    assert.equal(limited.status, 429, limited.text);
    assert.match(limited.json().message, /usage_limit_reached/);
    assert.equal(limited.headers['x-usage-limit'], '3');
    assert.equal(limited.headers['x-usage-remaining'], '0');
    const periodEnd = Date.parse(subscription.current_period.to);
    const retryAfter = Number(limited.headers['retry-after']);
    assert.ok(retryAfter >= 1 && retryAfter <= Math.ceil((periodEnd - Date.now()) / 1000) + 1, `Retry-After ${retryAfter}`);
    // The header lookup finds the same customer by its key.
    assert.equal((await counted('the limit by header', () => call('/by-header/x', acmeToken, { 'x-customer': 'acme-corp' }), (r) => r.status === 429)).status, 429);

    await sleep(Math.max(0, periodEnd - Date.now() + 20));
    const reset = await call('/api/hello', acmeToken);
    assert.equal(reset.status, 200, reset.text);
    assert.equal(reset.headers['x-usage-remaining'], '2');
  });

  test('header lookup: an unknown header value is 403, a missing header too', async () => {
    assert.equal((await call('/by-header/x', acmeToken, { 'x-customer': 'nobody-corp' })).status, 403);
    assert.equal((await call('/by-header/x', acmeToken)).status, 403);
  });

  test('a config with a header lookup but no header name is refused', async () => {
    const ok = await gateway.reload(billingConfig({ extra: { routes: [{ name: 'bad', paths: ['/bad'], plugins: [{ name: 'entitlement-enforcement', config: { feature: { key: FEATURE }, customer: { look_up_value_in: 'header' } } }] }] } }));
    assert.equal(ok, false);
  });
});
