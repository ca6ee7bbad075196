/**
 * An entitlement on a token meter limits ai-proxy's calls to Anthropic: metering-and-billing meters the
 * tokens of each translated answer (kong.llm_request), the token meter sums them, and once a customer's
 * tokens reach the plan's limit entitlement-enforcement answers 429 `usage_limit_reached`, before the
 * provider is called.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startLlmProvider, type StandInProvider } from '../../../examples/llm-provider.ts';
import { request, startGateway, type Reply, type TestGateway } from '../../helpers/gateway.ts';
import { waitFor } from '../../helpers/support.ts';
import { BillingApi } from '../metering/billing/support.ts';
import { meteringConfig } from '../metering/catalogue-support.ts';

const TOKEN_METER = { key: 'llm_tokens', name: 'LLM tokens', event_type: 'kong.llm_request', aggregation: 'sum', value_property: '$.tokens' };
const FEATURE = 'ai_tokens';
const LIMIT = 20;
const oauth2 = { name: 'oauth2', config: { enable_client_credentials: true, global_credentials: true } };

let provider: StandInProvider;
let gateway: TestGateway;
let token: string;

before(async () => {
  provider = await startLlmProvider();
  const base = meteringConfig({ meters: [TOKEN_METER], metering: { billing: { collection_period: 'PT1S' } } }) as Record<string, any>;
  const claude = { route_type: 'llm/v1/chat', model: { provider: 'anthropic', name: 'claude-3', options: { max_tokens: 64, anthropic_version: '2023-06-01', upstream_url: `${provider.url}/v1/messages` } } };
  gateway = await startGateway({
    ...base,
    services: [
      {
        name: 'llm',
        url: provider.url,
        routes: [{
          name: 'chat',
          paths: ['/chat'],
          protocols: ['https'],
          plugins: [
            oauth2,
            { name: 'entitlement-enforcement', config: { feature: { key: FEATURE } } },
            { name: 'metering-and-billing', config: { queue: { max_coalescing_delay: 0.05 } } },
            { name: 'ai-proxy', config: claude },
          ],
        }],
      },
    ],
    consumers: [...base.consumers, { username: 'acme', oauth2_credentials: [{ name: 'acme', client_id: 'acme-app', client_secret: 'acme-secret-0123456789' }] }],
  });
  const api = await BillingApi.connect(gateway.https);
  await api.feature(TOKEN_METER.key, { key: FEATURE });
  const plan = await api.activePlan([{ key: FEATURE, name: 'AI tokens', feature_key: FEATURE, price: { type: 'unit', amount: '0.001' }, entitlement: { type: 'metered', limit: String(LIMIT) } }]);
  await api.customer({ key: 'acme-corp', usage_attribution: { subject_keys: ['acme'] } });
  await api.subscribe('acme-corp', plan.key);
  const res = await request(`${gateway.https}/chat/oauth2/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'grant_type=client_credentials&client_id=acme-app&client_secret=acme-secret-0123456789',
  });
  assert.equal(res.status, 200, res.text);
  token = res.json().access_token;
});

after(async () => {
  await gateway?.stop();
  await provider?.close();
});

const ask = (): Promise<Reply> =>
  request(`${gateway.https}/chat`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: { messages: [{ role: 'user', content: 'one two three' }] } });

test('calls pass while the tokens metered stay under the limit, then 429 without calling the provider', async () => {
  // Each call is 3 prompt and 5 answer tokens: 8 a call, so the limit of 20 is reached by the third.
  const first = await waitFor(async () => {
    const r = await ask();
    return r.status === 200 ? r : undefined;
  }, 'the subscription in the cache', 20_000);
  assert.deepEqual(first.json().usage, { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 });
  let answered = 1;
  const limited = await waitFor(async () => {
    const r = await ask();
    if (r.status === 200) answered++;
    return r.status === 429 ? r : undefined;
  }, 'the token limit', 20_000);
  assert.match(limited.json().message, /usage_limit_reached/);
  assert.equal(limited.headers['x-usage-limit'], String(LIMIT));
  assert.ok(answered * 8 >= LIMIT, `refused after ${answered} answered calls (${answered * 8} tokens)`);
  const calls = provider.requests.length;
  assert.equal((await ask()).status, 429);
  assert.equal(provider.requests.length, calls, 'a refused call never reaches the provider');
});
