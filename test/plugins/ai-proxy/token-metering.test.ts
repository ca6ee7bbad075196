/**
 * ai-proxy in front of Anthropic and Ollama (and Cohere and Bedrock, stand-in-providers.ts), with
 * metering-and-billing on the same route: what the client reads is OpenAI-shaped with `usage` (a JSON
 * answer, or a translated stream's usage chunk), and that is what metering-and-billing meters, so the
 * kong.llm_request events carry the provider's token counts and a token meter sums them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startLlmProvider, type StandInProvider } from '../../../examples/llm-provider.ts';
import { startGateway, type TestGateway } from '../../helpers/gateway.ts';
import { ALICE, call, fixtureConfig, meteringApi, oauth2, tokenOf, type MeteringApi } from '../metering-and-billing/support.ts';
import { startBedrock, startCohere, type ProviderStandIn } from './stand-in-providers.ts';

const TOKEN_METER = { key: 'llm_tokens', name: 'LLM tokens', event_type: 'kong.llm_request', aggregation: 'sum', value_property: '$.tokens', dimensions: { model: '$.model', type: '$.type' } };
const METERED = { name: 'metering-and-billing', config: { queue: { max_coalescing_delay: 0.05 } } };

describe('AI token metering through ai-proxy', () => {
  let provider: StandInProvider;
  let cohere: ProviderStandIn;
  let bedrock: ProviderStandIn;
  let gw: TestGateway;
  let api: MeteringApi;
  let token: string;

  before(async () => {
    provider = await startLlmProvider();
    const route = (name: string, config: Record<string, unknown>) => ({ name, paths: [`/${name}`], plugins: [oauth2, METERED, { name: 'ai-proxy', config }] });
    const anthropic = { route_type: 'llm/v1/chat', model: { provider: 'anthropic', name: 'claude-3', options: { max_tokens: 64, anthropic_version: '2023-06-01', upstream_url: `${provider.url}/v1/messages` } } };
    const ollama = { route_type: 'llm/v1/chat', model: { provider: 'llama2', name: 'llama3', options: { llama2_format: 'ollama', upstream_url: `${provider.url}/api/chat` } } };
    cohere = await startCohere('cohere-key');
    bedrock = await startBedrock('titan', { AKID: 'secret' });
    const command = { route_type: 'llm/v1/chat', auth: { header_name: 'Authorization', header_value: 'Bearer cohere-key' }, model: { provider: 'cohere', name: 'command', options: { upstream_url: `${cohere.url}/v1/chat` } } };
    const titan = {
      route_type: 'llm/v1/chat',
      auth: { aws_access_key_id: 'AKID', aws_secret_access_key: 'secret' },
      model: { provider: 'bedrock', name: 'titan', options: { bedrock: { aws_region: 'us-east-1' }, upstream_url: `${bedrock.url}/model/titan/converse-stream` } },
    };
    const routes = [route('claude', anthropic), route('ollama', ollama), route('cohere', command), route('bedrock', titan)];
    const services = [{ name: 'llm', url: provider.url, routes }];
    gw = await startGateway(fixtureConfig({ upstream: provider.url, plugin: null, meters: [TOKEN_METER], services }));
    api = await meteringApi(gw.https);
    token = await tokenOf(gw.https, ALICE);
  });
  after(async () => {
    await gw.stop();
    await Promise.all([provider.close(), cohere.close(), bedrock.close()]);
  });

  const chat = (content: string, stream = false) => JSON.stringify({ messages: [{ role: 'user', content }], stream });

  async function tokensOf(requestId: string): Promise<{ request: any; response: any }> {
    const [request] = await api.eventsWhen({ id: `${requestId}:request` }, 1);
    const [response] = await api.eventsWhen({ id: `${requestId}:response` }, 1);
    return { request: request.event.data, response: response.event.data };
  }

  for (const [path, model] of [['/claude', 'claude-3'], ['/ollama', 'llama3']] as const) {
    test(`${path}: a JSON answer's usage, translated, is metered`, async () => {
      const res = await call(gw.http, token, path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat('one two three') });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.json().usage, { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8 });
      const { request, response } = await tokensOf(res.headers['x-kong-request-id'] as string);
      assert.deepEqual([request.type, request.tokens, request.model, response.type, response.tokens], ['request', 3, model, 'response', 5]);
    });

    test(`${path}: a translated stream's usage chunk is metered`, async () => {
      const res = await call(gw.http, token, path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat('one two three four', true) });
      assert.equal(res.status, 200, res.text);
      assert.match(res.text, /data: \[DONE\]\n\n$/);
      const { request, response } = await tokensOf(res.headers['x-kong-request-id'] as string);
      assert.deepEqual([request.tokens, response.tokens], [4, 6]);
    });
  }

  test("cohere: its billed units, as the answer's usage, are metered", async () => {
    const res = await call(gw.http, token, '/cohere', { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat('How long is the Danube?') });
    assert.equal(res.status, 200, res.text);
    const { request, response } = await tokensOf(res.headers['x-kong-request-id'] as string);
    assert.deepEqual([request.tokens, request.model, response.tokens], [44, 'command', 21]);
  });

  test("bedrock: a binary event stream's usage, translated into the usage chunk, is metered", async () => {
    const res = await call(gw.http, token, '/bedrock', { method: 'POST', headers: { 'content-type': 'application/json' }, body: chat('How long is the Danube?', true) });
    assert.equal(res.status, 200, res.text);
    assert.match(res.text, /data: \[DONE\]\n\n$/);
    const { request, response } = await tokensOf(res.headers['x-kong-request-id'] as string);
    assert.deepEqual([request.tokens, response.tokens], [403, 57]);
  });

  test('a token meter sums them by model', async () => {
    const result = await api.queryWhen('llm_tokens', { group_by_dimensions: ['model', 'type'] }, (r) => r.data.length >= 4);
    const value = (model: string, type: string) =>
      Number(result.data.find((row) => row.dimensions.model === model && row.dimensions.type === type)?.value ?? 0);
    assert.deepEqual([value('claude-3', 'request'), value('claude-3', 'response'), value('llama3', 'request'), value('llama3', 'response')], [7, 11, 7, 11]);
  });
});
