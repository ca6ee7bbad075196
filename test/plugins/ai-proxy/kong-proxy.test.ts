/**
 * Kong's ai-proxy against a real gateway and a stand-in provider (examples/llm-provider.ts) speaking
 * OpenAI's, Anthropic's and Ollama's formats, ported from spec/03-plugins/38-ai-proxy/02-openai, 03-anthropic,
 * 07-llama2 and 09-streaming integration specs: the client speaks OpenAI's format; the provider gets its
 * own format, endpoint and auth (from the config, a vault reference, or the client's with allow_override);
 * answers come back in OpenAI's format with `usage`, streams chunk by chunk; bad requests get Kong's 400
 * `{"error":{"message"}}`. Config checks use Kong's messages (00-config_spec.lua).
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, test } from 'node:test';
import { startLlmProvider, type StandInProvider } from '../../../examples/llm-provider.ts';
import { aroundTests, request, startGateway, type Reply } from '../../helpers/gateway.ts';
import { closedPort } from '../../helpers/support.ts';
import { pluginConfigErrors } from '../config-check.ts';

/** Released by a test once its client read a stream's first chunk. */
let releaseStream: () => void = () => {};
/** A gateway holding the whole stream back would never hand the client its first chunk: the stand-in waits for it. */
const holdStream = { afterFirstChunk: () => new Promise<void>((r) => (releaseStream = r)) };

const OPENAI_AUTH = { header_name: 'Authorization', header_value: 'Bearer openai-key' };
const chat = (content = 'What is 1 + 1?') => ({ messages: [{ role: 'system', content: 'You are a mathematician.' }, { role: 'user', content }] });

describe('ai-proxy', () => {
  const routes = (provider: string) => {
    const proxy = (name: string, config: Record<string, unknown>) => ({ name, paths: [`/${name}`], plugins: [{ name: 'ai-proxy', config }] });
    const openai = (path: string, extra: Record<string, unknown> = {}) => ({
      route_type: 'llm/v1/chat',
      auth: OPENAI_AUTH,
      model: { provider: 'openai', name: 'gpt-3.5-turbo', options: { max_tokens: 256, temperature: 1.0, upstream_url: `${provider}${path}` } },
      ...extra,
    });
    return [
      proxy('openai-chat', openai('/v1/chat/completions')),
      proxy('openai-completions', { ...openai('/v1/completions'), route_type: 'llm/v1/completions' }),
      proxy('openai-small', { ...openai('/v1/chat/completions'), max_request_body_size: 64 }),
      proxy('openai-no-stream', { ...openai('/v1/chat/completions'), response_streaming: 'deny' }),
      proxy('openai-any-model', { ...openai('/v1/chat/completions'), model: { provider: 'openai', options: { upstream_url: `${provider}/v1/chat/completions` } } }),
      proxy('openai-override', { ...openai('/v1/chat/completions'), auth: { ...OPENAI_AUTH, allow_override: true } }),
      proxy('openai-query-auth', { ...openai('/v1/chat/completions'), auth: { param_name: 'apikey', param_value: 'query-key', param_location: 'query' } }),
      proxy('openai-body-auth', { ...openai('/v1/chat/completions'), auth: { param_name: 'apikey', param_value: 'body-key', param_location: 'body' } }),
      proxy('openai-vault', { ...openai('/v1/chat/completions'), auth: { header_name: 'Authorization', header_value: '{vault://env/tollgate_test_llm_key}' } }),
      proxy('openai-missing', openai('/v1/nowhere')),
      proxy('anthropic-chat', {
        route_type: 'llm/v1/chat',
        auth: { header_name: 'x-api-key', header_value: 'anthropic-key' },
        model: { provider: 'anthropic', name: 'claude-2.1', options: { max_tokens: 256, temperature: 1.0, anthropic_version: '2023-06-01', upstream_url: `${provider}/v1/messages` } },
      }),
      proxy('anthropic-completions', {
        route_type: 'llm/v1/completions',
        auth: { header_name: 'x-api-key', header_value: 'anthropic-key' },
        model: { provider: 'anthropic', name: 'claude-2.1', options: { max_tokens: 256, anthropic_version: '2023-06-01', upstream_url: `${provider}/v1/complete` } },
      }),
      proxy('ollama-chat', { route_type: 'llm/v1/chat', model: { provider: 'llama2', name: 'llama2', options: { llama2_format: 'ollama', max_tokens: 256, upstream_url: `${provider}/api/chat` } } }),
      proxy('ollama-generate', { route_type: 'llm/v1/completions', model: { provider: 'llama2', name: 'llama2', options: { llama2_format: 'ollama', upstream_url: `${provider}/api/generate` } } }),
      proxy('preserve', { route_type: 'preserve', auth: OPENAI_AUTH, model: { provider: 'openai', options: { upstream_url: `${provider}/v1/chat/completions` } } }),
    ];
  };

  const env = aroundTests(async () => {
    process.env.TOLLGATE_TEST_LLM_KEY = 'Bearer from-the-vault';
    const provider = await startLlmProvider(0, holdStream);
    // The service's own URL is never used: ai-proxy sends every request to the provider.
    const gw = await startGateway({ services: [{ name: 'llm', url: `http://127.0.0.1:${await closedPort()}`, routes: routes(provider.url) }] });
    return {
      gw,
      provider,
      async close() {
        await gw.stop();
        await provider.close();
      },
    };
  });
  const post = (path: string, body: unknown, headers: http.OutgoingHttpHeaders = {}) => request(`${env.gw.http}${path}`, { method: 'POST', body: body as Record<string, unknown>, headers });
  const lastSent = () => env.provider.requests.at(-1)!;
  const refusedWith = (res: Reply, message: string) => {
    assert.equal(res.status, 400, res.text);
    assert.deepEqual(res.json(), { error: { message } });
  };

  describe('openai', () => {
    test('a chat request goes to the provider with the configured model, options and auth; the answer passes unchanged', async () => {
      const res = await post('/openai-chat', chat());
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers['x-kong-llm-model'], 'openai/gpt-3.5-turbo');
      const body = res.json();
      assert.equal(body.object, 'chat.completion');
      assert.equal(body.choices[0].message.content, 'You said: What is 1 + 1?');
      assert.deepEqual(body.usage, { prompt_tokens: 9, completion_tokens: 7, total_tokens: 16 });
      const sent = lastSent();
      assert.equal(sent.path, '/v1/chat/completions');
      assert.equal(sent.headers.authorization, 'Bearer openai-key');
      assert.deepEqual({ model: sent.body.model, max_tokens: sent.body.max_tokens, temperature: sent.body.temperature, stream: sent.body.stream }, { model: 'gpt-3.5-turbo', max_tokens: 256, temperature: 1, stream: false });
      assert.deepEqual(sent.body.messages, chat().messages);
    });

    test('a completions request', async () => {
      const res = await post('/openai-completions', { prompt: 'Say hello' });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.json().choices[0].text, 'You said: Say hello');
      assert.equal(lastSent().path, '/v1/completions');
    });

    test("Kong's 400s: no prompts, the wrong route type, several formats, another model, no model at all", async () => {
      refusedWith(await post('/openai-chat', { model: 'gpt-3.5-turbo' }), "request body doesn't contain valid prompts");
      refusedWith(await post('/openai-chat', { prompt: 'hi' }), '[llm/v1/completions] message format is not compatible with [llm/v1/chat] route type');
      refusedWith(await post('/openai-completions', chat()), '[llm/v1/chat] message format is not compatible with [llm/v1/completions] route type');
      refusedWith(await post('/openai-chat', { ...chat(), prompt: 'hi' }), 'request matches multiple LLM request formats');
      refusedWith(await post('/openai-chat', { ...chat(), model: 'try-to-override-the-model' }), 'cannot use own model - must be: gpt-3.5-turbo');
      refusedWith(await post('/openai-any-model', chat()), 'model parameter not found in request, nor in gateway configuration');
    });

    test('without a configured name, the request names the model', async () => {
      const res = await post('/openai-any-model', { ...chat(), model: 'gpt-4o' });
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers['x-kong-llm-model'], 'openai/gpt-4o');
      assert.equal(lastSent().body.model, 'gpt-4o');
    });

    test('a body that is not JSON, not an object, or larger than max_request_body_size is refused unread', async () => {
      const message = 'content-type header does not match request body, or bad JSON formatting';
      refusedWith(await post('/openai-chat', '{"messages": [', { 'content-type': 'application/json' }), message);
      refusedWith(await post('/openai-chat', '[1, 2]', { 'content-type': 'application/json' }), message);
      refusedWith(await post('/openai-chat', 'messages=hi', { 'content-type': 'application/x-www-form-urlencoded' }), message);
      refusedWith(await post('/openai-small', chat('x'.repeat(100))), message);
      refusedWith(await post('/openai-chat', '['.repeat(5000), { 'content-type': 'application/json' }), message);
    });

    test('response_streaming deny refuses a stream', async () => {
      refusedWith(await post('/openai-no-stream', { ...chat(), stream: true }), 'response streaming is not enabled for this LLM');
    });

    test("auth: the configured header replaces the client's, unless allow_override; a query or body parameter", async () => {
      await post('/openai-chat', chat(), { authorization: 'Bearer client-key' });
      assert.equal(lastSent().headers.authorization, 'Bearer openai-key');
      await post('/openai-override', chat(), { authorization: 'Bearer client-key' });
      assert.equal(lastSent().headers.authorization, 'Bearer client-key');
      await post('/openai-override', chat());
      assert.equal(lastSent().headers.authorization, 'Bearer openai-key');
      const res = await request(`${env.gw.http}/openai-query-auth?apikey=client&x=1`, { method: 'POST', body: chat() });
      assert.equal(res.status, 200, res.text);
      await post('/openai-body-auth', { ...chat(), apikey: 'client' });
      assert.equal(lastSent().body.apikey, 'body-key');
    });

    test('a query parameter is set on what goes upstream', async () => {
      await request(`${env.gw.http}/openai-query-auth?apikey=client&x=1`, { method: 'POST', body: chat() });
      assert.equal(lastSent().path, '/v1/chat/completions');
    });

    test('an auth header from a vault reference', async () => {
      await post('/openai-vault', chat());
      assert.equal(lastSent().headers.authorization, 'Bearer from-the-vault');
    });

    test("a provider's error passes unchanged, without the model header", async () => {
      const res = await post('/openai-missing', chat());
      assert.equal(res.status, 404);
      assert.deepEqual(res.json(), { error: 'no such endpoint' });
      assert.equal(res.headers['x-kong-llm-model'], undefined);
    });

    test('a stream passes through chunk by chunk', async () => {
      const { first, rest, headers } = await streamed('/openai-chat', { ...chat('one two'), stream: true, stream_options: { include_usage: true } });
      assert.match(String(headers['content-type']), /^text\/event-stream/);
      assert.equal(JSON.parse(first.slice(6)).choices[0].delta.content, 'You');
      const events = dataOf(first + rest);
      assert.equal(events.at(-1), '[DONE]');
      assert.deepEqual(JSON.parse(events.at(-2)!).usage, { prompt_tokens: 6, completion_tokens: 4, total_tokens: 10 });
    });

    test('preserve: the body goes as it is, with the auth', async () => {
      const body = { ...chat(), model: 'anything', custom: true };
      const res = await post('/preserve', body);
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(lastSent().body, body);
      assert.equal(lastSent().headers.authorization, 'Bearer openai-key');
    });
  });

  describe('anthropic', () => {
    test("a chat request becomes a Messages request (system prompt apart, Kong's options); the answer comes back in OpenAI's format", async () => {
      const res = await post('/anthropic-chat', chat());
      assert.equal(res.status, 200, res.text);
      assert.equal(res.headers['x-kong-llm-model'], 'anthropic/claude-2.1');
      assert.match(String(res.headers['content-type']), /^application\/json/);
      assert.deepEqual(res.json(), {
        choices: [{ index: 0, message: { role: 'assistant', content: 'You said: What is 1 + 1?' }, finish_reason: 'end_turn' }],
        usage: { prompt_tokens: 9, completion_tokens: 7, total_tokens: 16 },
        model: 'claude-2.1',
        object: 'chat.completion',
      });
      const sent = lastSent();
      assert.equal(sent.path, '/v1/messages');
      assert.equal(sent.headers['x-api-key'], 'anthropic-key');
      assert.equal(sent.headers['anthropic-version'], '2023-06-01');
      assert.deepEqual(sent.body, {
        messages: [{ role: 'user', content: 'What is 1 + 1?' }], system: 'You are a mathematician.', model: 'claude-2.1', max_tokens: 256, temperature: 1, stream: false,
      });
    });

    test("tools, a tool choice, the assistant's tool calls and their results in Anthropic's blocks; a tool_use answer as OpenAI's tool_calls", async () => {
      const weather = { type: 'function', function: { name: 'weather', description: 'The weather in a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } };
      const res = await post('/anthropic-chat', {
        messages: [
          { role: 'user', content: 'Weather in Paris?' },
          { role: 'assistant', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] },
          { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
          { role: 'user', content: 'And Rome?' },
        ],
        tools: [weather],
        tool_choice: 'required',
      });
      assert.equal(res.status, 200, res.text);
      const sent = lastSent().body;
      assert.deepEqual(sent.tools, [{ name: 'weather', description: 'The weather in a city', input_schema: weather.function.parameters }]);
      assert.deepEqual(sent.tool_choice, { type: 'any' });
      assert.deepEqual(sent.messages.slice(1, 3), [
        { role: 'assistant', content: [{ type: 'tool_use', id: 'call_1', name: 'weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1', content: 'sunny' }] },
      ]);
      const [choice] = res.json().choices;
      assert.equal(choice.finish_reason, 'tool_use');
      assert.deepEqual(choice.message.tool_calls, [{ id: 'toolu_1', type: 'function', function: { name: 'weather', arguments: '{"query":"And Rome?"}' } }]);
    });

    test('a completions request goes to the Complete API with a Human/Assistant prompt', async () => {
      const res = await post('/anthropic-completions', { prompt: 'Say hello' });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.json(), { choices: [{ index: 0, text: ' You said: Human: Say hello Assistant:', finish_reason: 'stop_sequence' }], model: 'claude-2.1', object: 'text_completion' });
      assert.equal(lastSent().body.prompt, 'Human: Say hello\n\nAssistant:');
      assert.equal(lastSent().body.max_tokens_to_sample, 256);
      // Kong has no translation of the Complete API's stream.
      refusedWith(await post('/anthropic-completions', { prompt: 'Say hello', stream: true }), 'no transformer available from format anthropic://stream/llm/v1/completions');
    });

    test("a stream is translated event by event into OpenAI chunks, ending with the usage and [DONE]", async () => {
      const { first, rest, headers } = await streamed('/anthropic-chat', { ...chat('one two'), stream: true });
      assert.equal(headers['content-type'], 'text/event-stream');
      assert.equal(headers['content-length'], undefined);
      assert.deepEqual(JSON.parse(dataOf(first)[0]).choices[0].delta, { content: '', role: 'assistant' });
      const events = dataOf(first + rest);
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
      assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), 'You said: one two');
      assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === 'msg_1' && c.model === 'claude-2.1'));
      assert.deepEqual(chunks.at(-1).usage, { prompt_tokens: 6, completion_tokens: 4, total_tokens: 10 });
      assert.equal(events.at(-1), '[DONE]');
    });
  });

  describe('ollama (llama2 with the ollama format)', () => {
    test("a chat answer's eval counts become OpenAI's usage", async () => {
      const res = await post('/ollama-chat', chat());
      assert.equal(res.status, 200, res.text);
      const body = res.json();
      assert.deepEqual(body.usage, { prompt_tokens: 9, completion_tokens: 7, total_tokens: 16 });
      assert.deepEqual(body.choices, [{ finish_reason: 'stop', index: 0, message: { role: 'assistant', content: 'You said: What is 1 + 1?' } }]);
      assert.equal(body.object, 'chat.completion');
      assert.deepEqual(lastSent().body.options, { num_predict: 256 });
      assert.equal(lastSent().body.model, 'llama2');
    });

    test('a generate answer', async () => {
      const res = await post('/ollama-generate', { prompt: 'Say hello' });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.json().choices, [{ index: 0, text: 'You said: Say hello' }]);
      assert.equal(lastSent().body.prompt, 'Say hello');
    });

    test('an NDJSON stream becomes an event stream of OpenAI chunks', async () => {
      const { rest, first, headers } = await streamed('/ollama-chat', { ...chat('one two'), stream: true });
      assert.equal(headers['content-type'], 'text/event-stream');
      const events = dataOf(first + rest);
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e));
      assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), 'You said: one two');
      assert.deepEqual(chunks.at(-1).usage, { prompt_tokens: 6, completion_tokens: 4, total_tokens: 10 });
      assert.equal(events.at(-1), '[DONE]');
    });
  });

  /** A streamed answer: its first chunk read before the stand-in sends the rest (released here), then the rest. */
  async function streamed(path: string, body: unknown): Promise<{ first: string; rest: string; headers: http.IncomingHttpHeaders }> {
    return new Promise((resolve, reject) => {
      const req = http.request(`${env.gw.http}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
        let first = '';
        let rest = '';
        res.setEncoding('utf8');
        res.on('data', (text: string) => {
          if (first === '') {
            first = text;
            releaseStream();
          } else rest += text;
        });
        res.on('end', () => resolve({ first, rest, headers: res.headers }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(JSON.stringify(body));
    });
  }
});

/** The `data:` payloads of an event stream. */
function dataOf(stream: string): string[] {
  return stream.split('\n\n').filter((e) => e.startsWith('data: ')).map((e) => e.slice(6));
}

describe('ai-proxy config (00-config_spec.lua)', () => {
  const base = { route_type: 'llm/v1/chat', model: { provider: 'openai', name: 'gpt-4' } };

  test("Kong's entity checks and messages", async () => {
    assert.deepEqual(await pluginConfigErrors('ai-proxy', base), []);
    assert.deepEqual(await pluginConfigErrors('ai-proxy', { ...base, model: { provider: 'llama2', name: 'llama2', options: { llama2_format: 'ollama' } } }), [
      "config: must set 'model.options.upstream_url' for self-hosted providers/models",
    ]);
    assert.deepEqual(await pluginConfigErrors('ai-proxy', { ...base, model: { provider: 'anthropic', name: 'claude' } }), ["config: must set 'model.options.anthropic_version' for anthropic provider"]);
    assert.deepEqual(await pluginConfigErrors('ai-proxy', { ...base, auth: { header_name: 'Authorization' } }), ["config: all or none of these fields must be set: 'auth.header_name', 'auth.header_value'"]);
    assert.deepEqual(await pluginConfigErrors('ai-proxy', { ...base, auth: { param_name: 'k', param_value: 'v' } }), [
      "config: all or none of these fields must be set: 'auth.param_name', 'auth.param_value', 'auth.param_location'",
    ]);
    assert.deepEqual(await pluginConfigErrors('ai-proxy', { ...base, route_type: 'llm/v1/completions', logging: { log_statistics: true }, model: { provider: 'anthropic', name: 'c', options: { anthropic_version: '1' } } }), [
      'config: anthropic does not support statistics when route_type is llm/v1/completions',
    ]);
    assert.deepEqual(await pluginConfigErrors('ai-proxy', { ...base, llm_format: 'bedrock' }), ["config: native llm_format 'bedrock' can only be used with the 'bedrock' model.provider"]);
  });

  test('a vault reference that cannot resolve is refused', async () => {
    assert.deepEqual(await pluginConfigErrors('ai-proxy', { ...base, auth: { header_name: 'Authorization', header_value: '{vault://env/tollgate_test_unset_variable}' } }), [
      'config.auth.header_value: cannot resolve {vault://env/tollgate_test_unset_variable}: environment variable TOLLGATE_TEST_UNSET_VARIABLE is not set',
    ]);
  });
});
