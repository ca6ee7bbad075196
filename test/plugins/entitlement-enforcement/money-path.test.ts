/**
 * The money path end to end: requests through key-auth + entitlement-enforcement + metering-and-billing
 * to a real upstream, billed by the plans and invoices of the billing API. Proves that exactly the
 * answered requests are metered (refusals of the gateway are not, however many), that one long URL
 * cannot make a request unmeterable, that a hard limit admits exactly its limit under a burst and one
 * request at a time (X-Usage-Remaining counting the request itself), that a request admitted and then
 * not answered gives its place back, and that events dated in another period never reopen a limit.
 * Run again on a node of workers and on PostgreSQL by suites-on-shared-stores.test.ts.
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { request, startGateway, startUpstream, type Reply, type TestGateway, type Upstream } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';
import { anchorEndingIn, afterStart, BillingApi, billingConfig, METERS, sleep } from '../metering/billing/support.ts';

const FEATURE = 'api_requests';
const SOFT_FEATURE = 'soft_requests';
const CUSTOMERS = ['refused', 'long', 'burst', 'steps', 'future', 'unanswered', 'soft'];

let gateway: TestGateway;
let upstream: Upstream;
let api: BillingApi;

function route(name: string, path: string, feature: string, url?: string): Record<string, unknown> {
  return {
    name,
    ...(url ? { service: name } : {}),
    paths: [path],
    plugins: [
      { name: 'key-auth', config: {} },
      { name: 'entitlement-enforcement', config: { feature: { key: feature } } },
      { name: 'metering-and-billing', config: {} },
    ],
  };
}

before(async () => {
  upstream = await startUpstream();
  gateway = await startGateway(
    billingConfig({
      extra: {
        meters: [
          ...METERS,
          {
            key: 'gateway_requests',
            name: 'Gateway requests',
            event_type: 'kong.api_request',
            aggregation: 'count',
            dimensions: { route: '$.route_name', status: '$.response_http_status', uri: '$.request_uri' },
          },
        ],
        services: [
          { name: 'backend', url: upstream.url, routes: [route('metered', '/metered', FEATURE), route('soft', '/soft', SOFT_FEATURE)] },
          // Nothing listens there: every request is answered by the gateway (502).
          { name: 'unreachable', url: 'http://127.0.0.1:9', retries: 0, routes: [route('unreachable', '/unreachable', FEATURE)] },
        ],
        consumers: CUSTOMERS.map((name) => ({ username: name, keyauth_credentials: [{ key: `${name}-key-0123456789` }] })),
      },
    }),
  );
  api = await BillingApi.connect(gateway.https);
  await api.feature('gateway_requests', { key: FEATURE, meter: { key: 'gateway_requests', filters: { route: { in: ['metered', 'unreachable'] } } } });
  await api.feature('gateway_requests', { key: SOFT_FEATURE, meter: { key: 'gateway_requests', filters: { route: { eq: 'soft' } } } });
});
after(async () => {
  await gateway?.stop();
  await upstream?.close();
});

function call(who: string, path = '/metered/x', key = `${who}-key-0123456789`): Promise<Reply> {
  return request(`${gateway.http}${path}`, { headers: { apikey: key } });
}

/** A customer (key = its consumer's username) on a plan of one metered card, subscribed now. */
async function subscribed(
  who: string,
  entitlement: Record<string, unknown>,
  options: { feature?: string; path?: string; anchorEndingInMs?: number } = {},
): Promise<any> {
  const feature = options.feature ?? FEATURE;
  const plan = await api.activePlan([
    {
      key: feature,
      name: 'Requests',
      feature_key: feature,
      price: { type: 'unit', amount: '0.1' },
      entitlement: { type: 'metered', ...entitlement },
    },
  ]);
  await api.customer({ key: who, usage_attribution: { subject_keys: [who] } });
  const subscription = await api.subscribe(
    who,
    plan.key,
    options.anchorEndingInMs ? { billing_anchor: anchorEndingIn(options.anchorEndingInMs) } : {},
  );
  await afterStart(subscription);
  // The gateway's entitlement cache learns of the subscription at once on its node, within a rebuild elsewhere;
  // the first request let through is the first one counted.
  await waitFor(
    async () => ((await call(who, options.path)).status === 403 ? undefined : true),
    `${who}'s subscription at the gateway`,
    20_000,
  );
  return subscription;
}

async function meteredOf(who: string, groupBy: string[] = []): Promise<any[]> {
  const result = await api.queryOk('gateway_requests', { filters: { dimensions: { subject: { eq: who } } }, group_by_dimensions: groupBy });
  return result.data;
}

async function meteredCount(who: string): Promise<string> {
  return (await meteredOf(who))[0]?.value ?? '0';
}

/** Waits until the meter holds `count` requests of the subject (request events are committed in batches). */
function meteredWhen(who: string, count: number): Promise<string> {
  return waitFor(async () => ((await meteredCount(who)) === String(count) ? String(count) : undefined), `${count} metered requests of ${who}`, 20_000);
}

describe('the money path', () => {
  test('refused requests are not billed: the invoice counts the answered requests only', async () => {
    // The probe of `subscribed` was one answered request: the limit of 4 leaves 3.
    await subscribed('refused', { limit: '4' }, { anchorEndingInMs: 12_000 });
    for (let i = 0; i < 3; i++) assert.equal((await call('refused')).status, 200);
    for (let i = 0; i < 10; i++) assert.equal((await call('refused')).status, 429);
    for (let i = 0; i < 3; i++) assert.equal((await call('refused', '/metered/x', 'not-a-key')).status, 401);
    const [invoice] = await api.invoicesWhen('refused', 1, 40_000);
    const line = invoice.lines.find((l: any) => l.rate_card_key === FEATURE);
    assert.equal(line.quantity, '4', JSON.stringify(invoice.lines));
    assert.equal(line.amount, '0.4');
    const byStatus = await meteredOf('refused', ['status']);
    assert.deepEqual(byStatus.map((row: any) => [row.dimensions.status, row.value]), [['200', '4']]);
  });

  test('a request with a 1,100-character URL is metered like any other (its URI stands in, bounded)', async () => {
    await subscribed('long', { limit: '100' });
    const pad = 'x'.repeat(1_100);
    for (let i = 0; i < 10; i++) assert.equal((await call('long', `/metered/x?pad=${pad}`)).status, 200);
    await meteredWhen('long', 11);
    const byUri = await meteredOf('long', ['uri']);
    const long = byUri.find((row: any) => row.dimensions.uri.startsWith('/metered/x?pad=xxx'));
    assert.ok(long, JSON.stringify(byUri).slice(0, 500));
    assert.equal(long.value, '10', 'one long URI reads the same every time');
    assert.ok(long.dimensions.uri.length <= 1024, `stand-in of ${long.dimensions.uri.length} characters`);
  });

  test('a hard limit of 5 admits exactly 5 of 300 concurrent requests, each told what remains', async () => {
    await subscribed('burst', { limit: '6' });
    const answers = await Promise.all(Array.from({ length: 300 }, () => call('burst')));
    const admitted = answers.filter((r) => r.status === 200);
    assert.equal(admitted.length, 5, `statuses: ${JSON.stringify(countBy(answers.map((r) => r.status)))}`);
    assert.equal(answers.filter((r) => r.status === 429).length, 295);
    assert.deepEqual(admitted.map((r) => r.headers['x-usage-remaining']).sort(), ['0', '1', '2', '3', '4']);
    for (let i = 0; i < 5; i++) assert.equal((await call('burst')).status, 429);
    assert.equal(await meteredWhen('burst', 6), '6');
  });

  test('one request at a time, a limit of 3 admits 3 and X-Usage-Remaining counts the request itself', async () => {
    await subscribed('steps', { limit: '4' });
    const remaining: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await call('steps');
      assert.equal(res.status, 200);
      remaining.push(res.headers['x-usage-remaining'] as string);
    }
    assert.deepEqual(remaining, ['2', '1', '0']);
    const refused = await call('steps');
    assert.equal(refused.status, 429);
    assert.equal(refused.headers['x-usage-remaining'], '0');
    assert.equal(refused.headers['x-usage-limit'], '4');
  });

  test('a request admitted and then not answered gives its place back', async () => {
    await subscribed('unanswered', { limit: '2' });
    for (let i = 0; i < 6; i++) assert.equal((await call('unanswered', '/unreachable/x')).status, 502);
    assert.equal((await call('unanswered')).status, 200);
    assert.equal((await call('unanswered')).status, 429);
    assert.equal(await meteredWhen('unanswered', 2), '2');
  });

  test('events dated in another usage period never reopen an exhausted limit', async () => {
    await subscribed('future', { limit: '2' });
    assert.equal((await call('future')).status, 200);
    await waitFor(async () => ((await call('future')).status === 429 ? true : undefined), 'the limit reached', 20_000);
    const at = (days: number) => new Date(Date.now() + days * 86_400_000).toISOString();
    const event = (time: string) => ({ specversion: '1.0', id: randomUUID(), source: 'elsewhere', type: 'kong.api_request', subject: 'future', time, data: { route_name: 'metered' } });
    const statuses: number[] = [];
    for (let round = 0; round < 6; round++) {
      await api.ingestOk([event(at(40)), event(at(-40))], 'application/cloudevents-batch+json');
      for (let i = 0; i < 4; i++) statuses.push((await call('future')).status);
      await sleep(250);
    }
    assert.deepEqual(countBy(statuses), { 429: statuses.length });
  });

  test('a soft limit lets every request through and counts each in X-Usage-Remaining', async () => {
    await subscribed('soft', { limit: '3', is_soft_limit: true }, { feature: SOFT_FEATURE, path: '/soft/x' });
    const remaining: string[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await call('soft', '/soft/x');
      assert.equal(res.status, 200);
      remaining.push(res.headers['x-usage-remaining'] as string);
    }
    assert.deepEqual(remaining, ['1', '0', '0', '0']);
    assert.equal(await meteredWhen('soft', 5), '5');
  });
});

function countBy(values: number[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const v of values) counts[v] = (counts[v] ?? 0) + 1;
  return counts;
}
