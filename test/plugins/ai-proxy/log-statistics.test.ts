/**
 * ai-proxy's `logging` (Kong's serialize-analytics filter): with log_statistics the access log line of
 * a call carries `ai.proxy.meta` (provider, request and response model) and `ai.proxy.usage` (token
 * counts and their cost from input_cost and output_cost), and azure's deployment; with log_payloads,
 * the request body too.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startLlmProvider } from '../../../examples/llm-provider.ts';
import { request, spawnGateway } from '../../helpers/gateway.ts';
import { startAzure } from './stand-in-providers.ts';

test('the access log line carries the statistics and the payload', async () => {
  const provider = await startLlmProvider();
  const logging = { log_statistics: true, log_payloads: true };
  const options = { max_tokens: 64, anthropic_version: '2023-06-01', input_cost: 3, output_cost: 15, upstream_url: `${provider.url}/v1/messages` };
  const gw = await spawnGateway({
    gateway: { log_level: 'info' },
    services: [{ name: 'llm', url: provider.url, routes: [{ name: 'claude', paths: ['/claude'], plugins: [{ name: 'ai-proxy', config: { route_type: 'llm/v1/chat', logging, model: { provider: 'anthropic', name: 'claude-3', options } } }] }] }],
  });
  const body = { messages: [{ role: 'user', content: 'one two three' }] };
  let id = '';
  try {
    const res = await request(`${gw.http}/claude`, { method: 'POST', body });
    assert.equal(res.status, 200, res.text);
    id = res.headers['x-kong-request-id'] as string;
  } finally {
    // Access lines are written at once; the node's stop waits for them.
    gw.kill('SIGTERM');
    await gw.exited;
    await provider.close();
  }
  const line = gw.output().split('\n').find((l) => l.includes(id) && l.includes('"ai"'));
  assert.ok(line, gw.output());
  assert.deepEqual(JSON.parse(line).ai, {
    proxy: {
      meta: { provider_name: 'anthropic', request_model: 'claude-3', response_model: 'claude-3' },
      usage: { prompt_tokens: 3, completion_tokens: 5, total_tokens: 8, cost: (3 * 3 + 5 * 15) / 1_000_000 },
      payload: { request: JSON.stringify(body) },
    },
  });
});

test("azure's statistics name its instance, deployment and API version, as Kong's", async () => {
  const azure = await startAzure('gpt-4-deployment', 'azure-key');
  const options = { azure_instance: 'acme', azure_deployment_id: 'gpt-4-deployment', upstream_url: `${azure.url}/openai/deployments/gpt-4-deployment/chat/completions` };
  const config = { route_type: 'llm/v1/chat', logging: { log_statistics: true }, auth: { header_name: 'api-key', header_value: 'azure-key' }, model: { provider: 'azure', name: 'gpt-4', options } };
  const gw = await spawnGateway({
    gateway: { log_level: 'info' },
    services: [{ name: 'llm', url: azure.url, routes: [{ name: 'azure', paths: ['/azure'], plugins: [{ name: 'ai-proxy', config }] }] }],
  });
  let id = '';
  try {
    const res = await request(`${gw.http}/azure`, { method: 'POST', body: { messages: [{ role: 'user', content: 'Hi' }] } });
    assert.equal(res.status, 200, res.text);
    id = res.headers['x-kong-request-id'] as string;
  } finally {
    gw.kill('SIGTERM');
    await gw.exited;
    await azure.close();
  }
  const line = gw.output().split('\n').find((l) => l.includes(id) && l.includes('"ai"'));
  assert.ok(line, gw.output());
  assert.deepEqual(JSON.parse(line).ai.proxy.meta, {
    provider_name: 'azure',
    request_model: 'gpt-4',
    response_model: 'gpt-4',
    azure_instance_id: 'acme',
    azure_deployment_id: 'gpt-4-deployment',
    azure_api_version: '2023-05-15',
  });
});
