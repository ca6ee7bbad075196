/**
 * ai-proxy's Azure, Cohere, Gemini, Hugging Face and Bedrock drivers against a real gateway and a stand-in
 * per provider (stand-in-providers.ts) that checks the path, auth and body it gets and answers with
 * hand-written samples in each provider's documented format (test/fixtures/ai-providers), covering what
 * Kong's spec/03-plugins/38-ai-proxy/04-cohere, 05-azure, 09-streaming, 10-huggingface and 11-gemini
 * cover: the client speaks OpenAI's format and reads OpenAI's format back, with
 * OpenAI's `usage`, streams included (Cohere's NDJSON, Gemini's array, Hugging Face's SSE, Bedrock's binary
 * event stream, each sent in small pieces).
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, test } from 'node:test';
import { driverFor } from '../../../plugins/ai-proxy/providers/index.ts';
import { aroundTests, request, startGateway, type Reply } from '../../helpers/gateway.ts';
import { closedPort } from '../../helpers/support.ts';
import { pluginConfigErrors } from '../config-check.ts';
import { crc32, eventMessage } from './aws-event-stream.ts';
import { providerSampleJson, startAzure, startBedrock, startCohere, startGemini, startHuggingFace, type ProviderStandIn } from './stand-in-providers.ts';

/** A system prompt, a question, its answer and a follow-up: every role a translation has to place. */
const CONVERSATION = [
  { role: 'system', content: 'You are a patient geography tutor.' },
  { role: 'user', content: 'Which river flows through Vienna?' },
  { role: 'assistant', content: 'The Danube flows through Vienna.' },
  { role: 'user', content: 'How long is the Danube?' },
];
const chat = { messages: CONVERSATION };
const HF_MODEL = 'HuggingFaceH4/zephyr-7b-beta';
const BEDROCK_MODEL = 'anthropic.claude-3-sonnet-20240229-v1:0';
const VERTEX_MODEL_PATH = '/v1/projects/tollgate/locations/us-central1/publishers/google/models/gemini-1.5-pro';

describe('ai-proxy providers', () => {
  const env = aroundTests(async () => {
    // For the bedrock route without keys: the environment's, as the AWS SDKs read them (put back on close).
    const saved = Object.fromEntries(['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_REGION'].map((name) => [name, process.env[name]]));
    Object.assign(process.env, { AWS_ACCESS_KEY_ID: 'AKIDFROMENV', AWS_SECRET_ACCESS_KEY: 'env-secret', AWS_REGION: 'eu-west-3' });
    const providers = {
      azure: await startAzure('gpt-4-deployment', 'azure-key'),
      cohere: await startCohere('cohere-key'),
      gemini: await startGemini(VERTEX_MODEL_PATH, 'gemini-key'),
      huggingface: await startHuggingFace(HF_MODEL, 'hf-key'),
      bedrock: await startBedrock(BEDROCK_MODEL, { AKIDTOLLGATE: 'bedrock-secret', AKIDFROMENV: 'env-secret' }),
    };
    const proxy = (name: string, config: Record<string, unknown>) => ({ name, paths: [`/${name}`], plugins: [{ name: 'ai-proxy', config: { route_type: 'llm/v1/chat', ...config } }] });
    const azure = (path: string) => ({
      auth: { header_name: 'api-key', header_value: 'azure-key' },
      model: {
        provider: 'azure',
        name: 'gpt-4',
        options: { max_tokens: 256, azure_instance: 'tollgate', azure_deployment_id: 'gpt-4-deployment', azure_api_version: '2024-02-01', upstream_url: providers.azure.url + path },
      },
    });
    const cohere = { auth: { header_name: 'Authorization', header_value: 'Bearer cohere-key' }, model: { provider: 'cohere', name: 'command', options: { max_tokens: 512, temperature: 0.5, top_p: 1, upstream_url: `${providers.cohere.url}/v1/chat` } } };
    const gemini = (name?: string) => ({
      auth: { param_name: 'key', param_value: 'gemini-key', param_location: 'query' },
      model: { provider: 'gemini', name, options: { max_tokens: 8192, temperature: 0.8, top_k: 1, top_p: 0.6, gemini: { api_endpoint: providers.gemini.url.slice('https://'.length), project_id: 'tollgate', location_id: 'us-central1' } } },
    });
    const huggingface = (waitForModel: boolean) => ({
      auth: { header_name: 'Authorization', header_value: 'Bearer hf-key' },
      model: { provider: 'huggingface', name: HF_MODEL, options: { max_tokens: 100, huggingface: { wait_for_model: waitForModel }, upstream_url: `${providers.huggingface.url}/models/${HF_MODEL}` } },
    });
    const bedrock = (operation: string, secret = 'bedrock-secret') => ({
      auth: { aws_access_key_id: 'AKIDTOLLGATE', aws_secret_access_key: secret },
      model: {
        provider: 'bedrock',
        name: BEDROCK_MODEL,
        options: { max_tokens: 8192, temperature: 0.8, top_p: 0.6, bedrock: { aws_region: 'us-east-1' }, upstream_url: `${providers.bedrock.url}/model/${encodeURIComponent(BEDROCK_MODEL)}/${operation}` },
      },
    });
    const routes = [
      proxy('azure-chat', azure('/openai/deployments/gpt-4-deployment/chat/completions')),
      proxy('azure-completions', { ...azure('/openai/deployments/gpt-4-deployment/completions'), route_type: 'llm/v1/completions' }),
      proxy('azure-wrong-key', { ...azure('/openai/deployments/gpt-4-deployment/chat/completions'), auth: { header_name: 'api-key', header_value: 'stolen' } }),
      proxy('cohere-chat', cohere),
      proxy('cohere-completions', { ...cohere, route_type: 'llm/v1/completions', model: { ...cohere.model, options: { ...cohere.model.options, top_k: 5, upstream_url: `${providers.cohere.url}/v1/generate` } } }),
      proxy('gemini', gemini('gemini-1.5-pro')),
      proxy('gemini-1.0', gemini('gemini-1.0-pro')),
      proxy('gemini-any-model', gemini()),
      proxy('huggingface-chat', huggingface(true)),
      proxy('huggingface-loading', huggingface(false)),
      proxy('huggingface-completions', { ...huggingface(true), route_type: 'llm/v1/completions' }),
      proxy('bedrock', bedrock('converse')),
      proxy('bedrock-stream', bedrock('converse-stream')),
      proxy('bedrock-wrong-secret', bedrock('converse', 'not-the-secret')),
      proxy('bedrock-env', { model: { provider: 'bedrock', name: BEDROCK_MODEL, options: { upstream_url: bedrock('converse').model.options.upstream_url } } }),
    ];
    const gw = await startGateway({ services: [{ name: 'llm', url: `http://127.0.0.1:${await closedPort()}`, routes }] });
    return {
      gw,
      providers,
      async close() {
        await gw.stop();
        await Promise.all(Object.values(providers).map((p) => p.close()));
        for (const [name, value] of Object.entries(saved)) {
          if (value === undefined) delete process.env[name];
          else process.env[name] = value;
        }
      },
    };
  });
  const post = (path: string, body: unknown) => request(`${env.gw.http}${path}`, { method: 'POST', body: body as Record<string, unknown> });
  const lastSent = (provider: ProviderStandIn) => provider.received.at(-1)!;
  const ok = (res: Reply) => {
    assert.equal(res.status, 200, res.text);
    return res.json();
  };

  describe('azure', () => {
    test("a chat request goes to the deployment with api-key and api-version; OpenAI's answer passes unchanged", async () => {
      const body = ok(await post('/azure-chat', chat));
      assert.deepEqual(body, providerSampleJson('openai/chat-completion.json'));
      assert.equal(body.choices[0].message.content, 'The Danube is about 2,850 km long, the second longest river in Europe.');
      assert.deepEqual(body.usage, { prompt_tokens: 48, completion_tokens: 19, total_tokens: 67 });
      const sent = lastSent(env.providers.azure);
      assert.equal(sent.path, '/openai/deployments/gpt-4-deployment/chat/completions');
      assert.equal(sent.query.get('api-version'), '2024-02-01');
      assert.equal(sent.headers['api-key'], 'azure-key');
      assert.deepEqual(sent.body, { messages: CONVERSATION, model: 'gpt-4', max_tokens: 256, stream: false });
    });

    test("the client's api-version wins; completions go to /completions", async () => {
      const res = await request(`${env.gw.http}/azure-chat?api-version=2024-10-21`, { method: 'POST', body: chat });
      ok(res);
      assert.equal(lastSent(env.providers.azure).query.get('api-version'), '2024-10-21');
      const body = ok(await post('/azure-completions', { prompt: 'What does a gateway do?' }));
      assert.deepEqual(body, providerSampleJson('openai/completion.json'));
      assert.equal(lastSent(env.providers.azure).path, '/openai/deployments/gpt-4-deployment/completions');
    });

    test("a JSON answer loses the provider's Set-Cookie, as Kong clears it for azure (not for cohere)", async () => {
      const azure = await post('/azure-chat', chat);
      assert.equal(azure.status, 200);
      assert.equal(azure.headers['set-cookie'], undefined);
      const cohere = await post('/cohere-chat', chat);
      assert.deepEqual(cohere.headers['set-cookie'], ['affinity=stand-in; Path=/']);
    });

    test("the provider's refusal passes unchanged", async () => {
      const res = await post('/azure-wrong-key', chat);
      assert.equal(res.status, 401);
      assert.deepEqual(res.json(), providerSampleJson('openai/invalid-api-key.json'));
      assert.equal(res.json().error.code, 'invalid_api_key');
    });
  });

  describe('cohere', () => {
    test("chat: the last message as `message`, the rest as chat_history, p and k; the answer in OpenAI's format with billed units as usage", async () => {
      const body = ok(await post('/cohere-chat', chat));
      assert.deepEqual(body, {
        choices: [{ index: 0, message: { role: 'assistant', content: 'The Danube runs for roughly 2,850 kilometres, from the Black Forest to the Black Sea.' }, finish_reason: 'stop' }],
        object: 'chat.completion',
        model: 'command',
        id: 'e41b7a90-2c6d-4f58-b3a1-9d07c5e2f468',
        usage: { prompt_tokens: 44, completion_tokens: 21, total_tokens: 65 },
      });
      const sent = lastSent(env.providers.cohere);
      assert.equal(sent.headers.authorization, 'Bearer cohere-key');
      // The shape of Kong's expected Cohere request (spec/fixtures/ai-proxy/unit/expected-requests/cohere/llm-v1-chat.json).
      assert.deepEqual(sent.body, {
        chat_history: [
          { role: 'USER', message: 'You are a patient geography tutor.' },
          { role: 'USER', message: 'Which river flows through Vienna?' },
          { role: 'CHATBOT', message: 'The Danube flows through Vienna.' },
        ],
        message: 'How long is the Danube?',
        model: 'command',
        max_tokens: 512,
        temperature: 0.5,
        p: 1,
        stream: false,
      });
    });

    test('completions go to /v1/generate; generations become a text_completion with the billed units as usage', async () => {
      const prompt = 'Name a river that crosses four capitals.';
      const body = ok(await post('/cohere-completions', { prompt }));
      assert.deepEqual(body.choices, [{ index: 0, text: 'The Danube crosses Vienna, Bratislava, Budapest and Belgrade.', finish_reason: 'stop' }]);
      assert.equal(body.object, 'text_completion');
      assert.equal(body.id, '7d3e9a12-b4c5-4e6f-8a1b-2c3d4e5f6a7b');
      assert.deepEqual(body.usage, { prompt_tokens: 9, completion_tokens: 14, total_tokens: 23 });
      assert.deepEqual(lastSent(env.providers.cohere).body, { prompt, model: 'command', max_tokens: 512, temperature: 0.5, p: 1, k: 5, stream: false });
    });

    test('a request with tools goes in OpenAI’s format, as Kong sends it', async () => {
      const tools = [{ type: 'function', function: { name: 'river_length', parameters: { type: 'object' } } }];
      await post('/cohere-chat', { ...chat, tools });
      const sent = lastSent(env.providers.cohere).body;
      assert.deepEqual(sent.messages, CONVERSATION);
      assert.deepEqual(sent.tools, tools);
    });

    test('an NDJSON stream becomes OpenAI chunks, ending with the usage and [DONE]', async () => {
      const { events, headers } = await streamed('/cohere-chat', { ...chat, stream: true });
      assert.equal(headers['content-type'], 'text/event-stream');
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
      assert.deepEqual(chunks[0].choices[0].delta, { content: '', role: 'assistant' });
      assert.equal(chunks.length, 10, 'the start, eight pieces of text and the usage');
      assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), 'The Danube is about 2,850 km long.');
      assert.ok(chunks.every((c) => c.id === '5c0e2b7a-93d4-4f1e-a8b6-71c2d9e04f35' && c.object === 'chat.completion.chunk'));
      assert.deepEqual(chunks.at(-1).usage, { prompt_tokens: 44, completion_tokens: 9, total_tokens: 53 });
      assert.equal(events.at(-1), '[DONE]');
    });
  });

  describe('gemini', () => {
    test("Vertex AI's generateContent with the key; contents, systemInstruction and generationConfig as Kong sends them; the answer with its usage", async () => {
      const body = ok(await post('/gemini', chat));
      assert.deepEqual(body, {
        choices: [{ index: 0, message: { role: 'assistant', content: 'About 2,850 kilometres.' }, finish_reason: 'stop' }],
        model: 'gemini-1.5-pro',
        object: 'chat.completion',
        usage: { prompt_tokens: 31, completion_tokens: 7, total_tokens: 38 },
      });
      const sent = lastSent(env.providers.gemini);
      assert.equal(sent.path, `${VERTEX_MODEL_PATH}:generateContent`);
      assert.equal(sent.query.get('key'), 'gemini-key');
      // The shape of Kong's expected Gemini request (spec/fixtures/ai-proxy/unit/expected-requests/gemini/llm-v1-chat.json).
      assert.deepEqual(sent.body, {
        contents: [
          { role: 'user', parts: [{ text: 'Which river flows through Vienna?' }] },
          { role: 'model', parts: [{ text: 'The Danube flows through Vienna.' }] },
          { role: 'user', parts: [{ text: 'How long is the Danube?' }] },
        ],
        systemInstruction: { parts: [{ text: 'You are a patient geography tutor.' }] },
        generationConfig: { maxOutputTokens: 8192, temperature: 0.8, topK: 1, topP: 0.6 },
      });
    });

    test('image parts become inline data or file data; a part Gemini has not is refused with 400', async () => {
      const content = [
        { type: 'text', text: 'What is in these?' },
        { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } },
        { type: 'image_url', image_url: { url: 'gs://bucket/cat.jpg' } },
      ];
      ok(await post('/gemini', { messages: [{ role: 'user', content }] }));
      assert.deepEqual(lastSent(env.providers.gemini).body.contents[0].parts, [
        { text: 'What is in these?' },
        { inlineData: { data: 'iVBORw0KGgo=', mimeType: 'image/png' } },
        { fileData: { fileUri: 'gs://bucket/cat.jpg', mimeType: 'image/generic' } },
      ]);
      const res = await post('/gemini', { messages: [{ role: 'user', content: [{ type: 'input_audio' }] }] });
      assert.equal(res.status, 400);
      assert.deepEqual(res.json(), { error: { message: "error transforming to gemini://llm/v1/chat: cannot transform part of type 'input_audio' to Gemini format" } });
    });

    test('gemini-1.0 models take no system prompt: refused before anything is sent', async () => {
      const before = env.providers.gemini.received.length;
      const res = await post('/gemini-1.0', chat);
      assert.equal(res.status, 400);
      assert.deepEqual(res.json(), { error: { message: "error transforming to gemini://llm/v1/chat: system prompts aren't supported on gemini-1.0 models" } });
      assert.equal(env.providers.gemini.received.length, before);
    });

    test("without a configured model, the request's names it; one that is no model name cannot reach another path", async () => {
      ok(await post('/gemini-any-model', { ...chat, model: 'gemini-1.5-pro' }));
      assert.equal(lastSent(env.providers.gemini).path, `${VERTEX_MODEL_PATH}:generateContent`);
      const before = env.providers.gemini.received.length;
      for (const model of ['../../../../v1/projects/other/x', 'gemini-1.5-pro:generateContent?alt=sse#', 'a/./b']) {
        const res = await post('/gemini-any-model', { ...chat, model });
        assert.equal(res.status, 400, model);
        assert.deepEqual(res.json(), { error: { message: `model parameter '${model}' is not a model name` } });
      }
      assert.equal(env.providers.gemini.received.length, before);
    });

    test('a candidate stopped for safety has no choices, and keeps its usage', async () => {
      const body = ok(await post('/gemini', { messages: [{ role: 'user', content: 'unsafe' }] }));
      assert.deepEqual(body.choices, []);
      assert.deepEqual(body.usage, { prompt_tokens: 12, completion_tokens: 0, total_tokens: 12 });
    });

    test("a stream goes to streamGenerateContent; the array's elements become chunks (text, then a function call), then the last usage and [DONE]", async () => {
      const { events } = await streamed('/gemini', { ...chat, stream: true });
      assert.equal(lastSent(env.providers.gemini).path, `${VERTEX_MODEL_PATH}:streamGenerateContent`);
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
      assert.equal(chunks.length, 3, 'two elements and the usage');
      assert.deepEqual(chunks[0].choices[0], { delta: { content: 'Let me measure it.', role: 'assistant' }, index: 0, finish_reason: null });
      const call = { type: 'function', function: { name: 'river_length', arguments: '{"river":"Danube","unit":"km"}' } };
      assert.deepEqual(chunks[1].choices[0], { delta: { tool_calls: [call] }, index: 0, finish_reason: 'STOP' });
      assert.deepEqual(chunks.at(-1).usage, { prompt_tokens: 58, completion_tokens: 15, total_tokens: 73 });
      assert.equal(events.at(-1), '[DONE]');
    });
  });

  describe('huggingface', () => {
    test("chat goes to the model's /v1/chat/completions with Kong's parameters and options; the answer as Kong shapes it", async () => {
      const body = ok(await post('/huggingface-chat', chat));
      assert.deepEqual(body, {
        model: HF_MODEL,
        object: 'chat.completion',
        choices: [{ message: { content: ' The Danube is roughly 2,850 km long and flows through ten countries.' }, index: 0, finish_reason: 'complete' }],
        usage: { prompt_tokens: 52, completion_tokens: 22, total_tokens: 74 },
      });
      const sent = lastSent(env.providers.huggingface);
      assert.equal(sent.path, `/models/${HF_MODEL}/v1/chat/completions`);
      assert.equal(sent.headers.authorization, 'Bearer hf-key');
      const options = { use_cache: false, wait_for_model: true };
      assert.deepEqual(sent.body, { messages: CONVERSATION, parameters: { max_length: 100 }, options, model: HF_MODEL });
    });

    test("a prompt goes to the model's URL as `inputs`, with max_new_tokens; the generated text comes back", async () => {
      const body = ok(await post('/huggingface-completions', { prompt: 'Who are you?' }));
      assert.deepEqual(body.choices, [{ message: { content: 'I am a small open model, answering through a gateway.' }, index: 0, finish_reason: 'complete' }]);
      const sent = lastSent(env.providers.huggingface);
      assert.equal(sent.path, `/models/${HF_MODEL}`);
      assert.equal(sent.body.inputs, 'Who are you?');
      assert.equal(sent.body.prompt, undefined);
      assert.deepEqual(sent.body.parameters, { max_new_tokens: 100 });
    });

    test("a model still loading: the provider's 503 passes unchanged", async () => {
      const res = await post('/huggingface-loading', chat);
      assert.equal(res.status, 503);
      assert.deepEqual(res.json(), { error: `Model ${HF_MODEL} is currently loading`, estimated_time: 42.5 });
    });

    test('an SSE stream is translated event by event, ending with the usage and [DONE]', async () => {
      const { events } = await streamed('/huggingface-chat', { ...chat, stream: true });
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
      assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), 'The Danube is about 2,850 km.');
      assert.deepEqual(chunks.at(-1).usage, { prompt_tokens: 52, completion_tokens: 6, total_tokens: 58 });
      assert.equal(events.at(-1), '[DONE]');
    });
  });

  describe('bedrock', () => {
    test('Converse, SigV4-signed (checked by the stand-in); system prompts apart, inferenceConfig; the answer with its usage', async () => {
      const body = ok(await post('/bedrock', chat));
      assert.deepEqual(body, {
        choices: [{ index: 0, message: { role: 'assistant', content: 'The Danube is about 2,850 km long.' }, finish_reason: 'stop' }],
        object: 'chat.completion',
        model: BEDROCK_MODEL,
        usage: { prompt_tokens: 37, completion_tokens: 12, total_tokens: 49 },
      });
      const sent = lastSent(env.providers.bedrock);
      assert.match(String(sent.headers.authorization), /^AWS4-HMAC-SHA256 Credential=AKIDTOLLGATE\/\d{8}\/us-east-1\/bedrock\/aws4_request, /);
      // The shape of Kong's expected Bedrock request (spec/fixtures/ai-proxy/unit/expected-requests/bedrock/llm-v1-chat.json).
      assert.deepEqual(sent.body, {
        anthropic_version: 'bedrock-2023-05-31',
        system: [{ text: 'You are a patient geography tutor.' }],
        messages: [
          { role: 'user', content: [{ text: 'Which river flows through Vienna?' }] },
          { role: 'assistant', content: [{ text: 'The Danube flows through Vienna.' }] },
          { role: 'user', content: [{ text: 'How long is the Danube?' }] },
        ],
        inferenceConfig: { maxTokens: 8192, temperature: 0.8, topP: 0.6 },
      });
    });

    test("tool calls and results in Converse's blocks; the client's query is not sent (the signature covers the request)", async () => {
      const messages = [
        { role: 'user', content: 'How long is the Danube?' },
        { role: 'assistant', tool_calls: [{ id: 'tooluse_1', type: 'function', function: { name: 'river_length', arguments: '{"river":"Danube"}' } }] },
        { role: 'tool', tool_call_id: 'tooluse_1', content: '2850' },
      ];
      const tools = [{ type: 'function', function: { name: 'river_length', description: 'Measures a river', parameters: { type: 'object' } } }];
      ok(await request(`${env.gw.http}/bedrock?trace=1`, { method: 'POST', body: { messages, tools } }));
      const sent = lastSent(env.providers.bedrock);
      assert.equal(sent.url, `/model/${encodeURIComponent(BEDROCK_MODEL)}/converse`);
      assert.deepEqual(sent.body.messages.slice(1), [
        { role: 'assistant', content: [{ toolUse: { toolUseId: 'tooluse_1', name: 'river_length', input: { river: 'Danube' } } }] },
        { role: 'user', content: [{ toolResult: { toolUseId: 'tooluse_1', content: [{ json: { result: 2850 } }] } }] },
      ]);
      assert.deepEqual(sent.body.toolConfig, { tools: [{ toolSpec: { name: 'river_length', description: 'Measures a river', inputSchema: { json: { type: 'object' } } } }] });
    });

    test("without keys in the config, the environment's credentials and region sign", async () => {
      ok(await post('/bedrock-env', chat));
      assert.match(String(lastSent(env.providers.bedrock).headers.authorization), /^AWS4-HMAC-SHA256 Credential=AKIDFROMENV\/\d{8}\/eu-west-3\/bedrock\/aws4_request, /);
    });

    test('a wrong secret makes a signature Bedrock refuses: its 403 passes unchanged', async () => {
      const res = await post('/bedrock-wrong-secret', chat);
      assert.equal(res.status, 403);
      assert.match(res.json().message, /signature we calculated does not match/);
    });

    test("ConverseStream's binary event stream, in 7-byte pieces, becomes OpenAI chunks: text, a tool call, its arguments, the stop, the usage and [DONE]", async () => {
      const { events, headers } = await streamed('/bedrock-stream', { ...chat, stream: true });
      assert.equal(headers['content-type'], 'text/event-stream');
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
      assert.deepEqual(chunks[0].choices[0].delta, { content: '', role: 'assistant' });
      assert.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Let me look that up.');
      const calls = chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
      assert.deepEqual(calls[0], { index: 1, id: 'tooluse_tg5Hq2Zr8Xk1', function: { name: 'river_length', arguments: '' } });
      assert.equal(calls.map((t: any) => t.function.arguments).join(''), '{"river": "Danube", "unit": "km"}');
      assert.ok(chunks.some((c) => c.choices[0]?.finish_reason === 'tool_calls'));
      assert.deepEqual(chunks.at(-1).usage, { prompt_tokens: 403, completion_tokens: 57, total_tokens: 460 });
      assert.equal(events.at(-1), '[DONE]');
    });
  });

  test("the stand-in's event stream carries AWS's checksums: CRC-32 of the prelude, and of the whole message", () => {
    assert.equal(crc32(Buffer.from('123456789')), 0xcbf43926, 'the CRC-32 check value');
    const message = eventMessage({ ':event-type': 'messageStop' }, { stopReason: 'end_turn' });
    assert.equal(message.readUInt32BE(0), message.length);
    assert.equal(message.readUInt32BE(8), crc32(message.subarray(0, 8)));
    assert.equal(message.readUInt32BE(message.length - 4), crc32(message.subarray(0, -4)));
  });

  /** A streamed answer's `data:` payloads, as the client reads them. */
  async function streamed(path: string, body: unknown): Promise<{ events: string[]; headers: http.IncomingHttpHeaders }> {
    const res = await post(path, body);
    assert.equal(res.status, 200, res.text);
    return { events: res.text.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6)), headers: res.headers };
  }
});

describe("each provider's own endpoint (Kong's upstream_url_format and operation_map)", () => {
  const url = (provider: string, options: Record<string, unknown>, route: 'llm/v1/chat' | 'llm/v1/completions', stream = false, name = 'm') =>
    driverFor({ provider, name, options } as any).defaultUrl(route, { provider, name, options } as any, stream);

  test('azure, cohere, gemini (public and Vertex), huggingface, bedrock', () => {
    const azure = { azure_instance: 'acme', azure_deployment_id: 'gpt4', azure_api_version: '2023-05-15' };
    assert.equal(url('azure', azure, 'llm/v1/chat'), 'https://acme.openai.azure.com:443/openai/deployments/gpt4/chat/completions');
    assert.equal(url('azure', azure, 'llm/v1/completions'), 'https://acme.openai.azure.com:443/openai/deployments/gpt4/completions');
    assert.equal(url('cohere', {}, 'llm/v1/chat'), 'https://api.cohere.com:443/v1/chat');
    assert.equal(url('cohere', {}, 'llm/v1/completions'), 'https://api.cohere.com:443/v1/generate');
    assert.equal(url('gemini', {}, 'llm/v1/chat', false, 'gemini-1.5-flash'), 'https://generativelanguage.googleapis.com/v1beta/models/gemini-1.5-flash:generateContent');
    assert.equal(url('gemini', {}, 'llm/v1/chat', true, 'gemini-1.5-flash'), 'https://generativelanguage.googleapis.com/v1beta/models/gemini-1.5-flash:streamGenerateContent');
    assert.equal(
      url('gemini', { gemini: { api_endpoint: 'us-central1-aiplatform.googleapis.com', project_id: 'p', location_id: 'us-central1' } }, 'llm/v1/chat', false, 'gemini-pro'),
      'https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/us-central1/publishers/google/models/gemini-pro:generateContent',
    );
    assert.equal(url('huggingface', {}, 'llm/v1/chat', false, HF_MODEL), `https://api-inference.huggingface.co:443/models/${HF_MODEL}/v1/chat/completions`);
    assert.equal(url('huggingface', {}, 'llm/v1/completions', false, HF_MODEL), `https://api-inference.huggingface.co:443/models/${HF_MODEL}`);
    const region = { bedrock: { aws_region: 'eu-west-1' } };
    assert.equal(url('bedrock', region, 'llm/v1/chat', false, BEDROCK_MODEL), 'https://bedrock-runtime.eu-west-1.amazonaws.com/model/anthropic.claude-3-sonnet-20240229-v1%3A0/converse');
    assert.equal(url('bedrock', region, 'llm/v1/chat', true, BEDROCK_MODEL), 'https://bedrock-runtime.eu-west-1.amazonaws.com/model/anthropic.claude-3-sonnet-20240229-v1%3A0/converse-stream');
  });
});

describe('ai-proxy provider configs', () => {
  const chatRoute = { route_type: 'llm/v1/chat' };
  const bedrockAuth = { aws_access_key_id: 'AKID', aws_secret_access_key: 'secret' };

  test("Kong's azure checks; every provider of Kong's list loads", async () => {
    assert.deepEqual(await pluginConfigErrors('ai-proxy', { ...chatRoute, model: { provider: 'azure', name: 'gpt-4' } }), [
      "config: must set 'model.options.azure_instance' for azure provider",
      "config: must set 'model.options.azure_deployment_id' for azure provider",
    ]);
    for (const model of [
      { provider: 'azure', name: 'gpt-4', options: { azure_instance: 'a', azure_deployment_id: 'd' } },
      { provider: 'cohere', name: 'command' },
      { provider: 'gemini', name: 'gemini-1.5-pro' },
      { provider: 'huggingface', name: HF_MODEL },
      { provider: 'bedrock', name: BEDROCK_MODEL, options: { bedrock: { aws_region: 'us-east-1' } } },
    ]) {
      assert.deepEqual(await pluginConfigErrors('ai-proxy', { ...chatRoute, auth: model.provider === 'bedrock' ? bedrockAuth : undefined, model }), [], model.provider);
    }
  });

  test('what this gateway cannot serve is refused by name: route types Kong has no transformer for, GCP service accounts, native formats, bedrock without a region or credentials', async () => {
    assert.deepEqual(await pluginConfigErrors('ai-proxy', { route_type: 'llm/v1/completions', model: { provider: 'gemini', name: 'gemini-pro' } }), [
      "config.route_type: provider 'gemini' does not support route_type 'llm/v1/completions' (Kong has no transformer for it; supported: llm/v1/chat)",
    ]);
    assert.deepEqual(await pluginConfigErrors('ai-proxy', { ...chatRoute, auth: { gcp_use_service_account: true }, model: { provider: 'gemini', name: 'gemini-pro' } }), [
      'config.auth.gcp_use_service_account: GCP service account auth is not supported by this gateway (use an API key: auth.param_name key, or header x-goog-api-key)',
    ]);
    assert.deepEqual(await pluginConfigErrors('ai-proxy', { ...chatRoute, llm_format: 'gemini', model: { provider: 'gemini', name: 'gemini-pro' } }), [
      "config.llm_format: the native 'gemini' format is not supported by this gateway (use 'openai')",
    ]);
    const region = process.env.AWS_REGION;
    delete process.env.AWS_REGION;
    delete process.env.AWS_DEFAULT_REGION;
    try {
      assert.deepEqual(await pluginConfigErrors('ai-proxy', { ...chatRoute, auth: bedrockAuth, model: { provider: 'bedrock', name: BEDROCK_MODEL } }), [
        'config.model.provider: AWS region not specified anywhere: set model.options.bedrock.aws_region, or AWS_REGION',
      ]);
    } finally {
      if (region !== undefined) process.env.AWS_REGION = region;
    }
    if (!process.env.AWS_ACCESS_KEY_ID) {
      assert.deepEqual(await pluginConfigErrors('ai-proxy', { ...chatRoute, model: { provider: 'bedrock', name: BEDROCK_MODEL, options: { bedrock: { aws_region: 'us-east-1' } } } }), [
        'config.model.provider: no AWS credentials: set auth.aws_access_key_id and auth.aws_secret_access_key, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY',
      ]);
    }
  });
});
