/**
 * Kong's ai-prompt-guard (spec/03-plugins/42-ai-prompt-guard/00-config_spec.lua and 02-integration_spec.lua)
 * against a real gateway: the cheese shop's allow and deny patterns, with and without the conversation
 * history, `{"error":{"message":"bad request"}}` for a refused prompt; in front of ai-proxy, a refused
 * prompt never reaches the provider. Beyond Kong's spec: a pattern the linear-time engine cannot run is
 * refused at load (Kong answers 500 on each request), and a prompt crafted against a backtracking
 * engine is answered at once.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { startLlmProvider } from '../../../examples/llm-provider.ts';
import { aroundTests, request, startGateway, startUpstream, type Reply } from '../../helpers/gateway.ts';
import { pluginConfigErrors } from '../config-check.ts';

const ALLOW = ['.*cheddar.*', '.*brie.*'];
const DENY = ['.*leicester.*', '.*edam.*'];
const shop = (...turns: [string, string][]) => ({ messages: [{ role: 'system', content: 'You run a cheese shop.' }, ...turns.map(([role, content]) => ({ role, content }))] });

describe('ai-prompt-guard', () => {
  const guarded = (name: string, config: Record<string, unknown>) => ({ name, paths: [`/${name}`], plugins: [{ name: 'ai-prompt-guard', config }] });
  const env = aroundTests(async () => {
    const upstream = await startUpstream();
    const provider = await startLlmProvider();
    const gw = await startGateway({
      services: [
        {
          name: 'echo',
          url: upstream.url,
          routes: [
            guarded('permit-history', { allow_patterns: ALLOW, deny_patterns: DENY, allow_all_conversation_history: true }),
            guarded('block-history', { allow_patterns: ALLOW, deny_patterns: DENY, allow_all_conversation_history: false }),
            guarded('allow-only-permit-history', { allow_patterns: ALLOW, allow_all_conversation_history: true }),
            guarded('allow-only-block-history', { allow_patterns: ALLOW, allow_all_conversation_history: false }),
            guarded('deny-only-permit-history', { deny_patterns: DENY, allow_all_conversation_history: true }),
            guarded('deny-only-block-history', { deny_patterns: DENY, allow_all_conversation_history: false }),
            guarded('all-roles', { deny_patterns: ['secret'], match_all_roles: true }),
            guarded('small', { deny_patterns: ['x'], max_request_body_size: 64 }),
            guarded('pathological', { deny_patterns: ['(a|aa)+$', '(\\w+\\s?)+!$'], max_request_body_size: 1_000_000 }),
            {
              name: 'proxied',
              paths: ['/proxied'],
              plugins: [
                { name: 'ai-prompt-guard', config: { deny_patterns: DENY } },
                { name: 'ai-proxy', config: { route_type: 'llm/v1/chat', model: { provider: 'openai', name: 'gpt-4', options: { upstream_url: `${provider.url}/v1/chat/completions` } } } },
              ],
            },
          ],
        },
      ],
    });
    return {
      gw,
      provider,
      async close() {
        await gw.stop();
        await upstream.close();
        await provider.close();
      },
    };
  });
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) => request(`${env.gw.http}/${path}`, { method: 'POST', body: body as Record<string, unknown>, headers });
  const badRequest = (res: Reply) => {
    assert.equal(res.status, 400, res.text);
    assert.deepEqual(res.json(), { error: { message: 'bad request' } });
  };

  test("allow and deny: the latest prompt only (history permitted), or the whole history", async () => {
    const chat = shop(['user', 'I think that cheddar is the best cheese.'], ['assistant', 'No, brie is the best cheese.'], ['user', 'Why brie?']);
    assert.equal((await post('permit-history', chat)).status, 200);
    assert.equal((await post('block-history', chat)).status, 200);
    badRequest(await post('permit-history', shop(['user', 'I think that cheddar or edam are the best cheeses.'], ['assistant', 'No, brie is the best cheese.'], ['user', 'Why?'])));
  });

  test('allow only', async () => {
    const chat = shop(['user', 'I think that cheddar is the best cheese.'], ['assistant', 'No, brie is the best cheese.'], ['user', 'Why brie?']);
    assert.equal((await post('allow-only-permit-history', chat)).status, 200);
    assert.equal((await post('allow-only-block-history', chat)).status, 200);
    badRequest(await post('allow-only-block-history', shop(['user', 'What is the best cheese?'])));
  });

  test('deny only: the latest prompt, or the history an operator keeps scanning', async () => {
    assert.equal((await post('deny-only-permit-history', shop(['user', 'I think that leicester is the best cheese.'], ['assistant', 'No, cheddar is the best cheese.'], ['user', 'Why cheddar?']))).status, 200);
    badRequest(await post('deny-only-permit-history', shop(['user', 'I think that leicester is the best cheese.'], ['assistant', 'No, edam is the best cheese.'], ['user', 'Why edam?'])));
    badRequest(await post('deny-only-block-history', shop(['user', 'I think that leicester is the best cheese.'], ['assistant', 'No, cheddar is the best cheese.'], ['user', 'Why cheddar?'])));
  });

  test("a completion's prompt; match_all_roles reads the system and assistant messages too", async () => {
    badRequest(await post('deny-only-block-history', { prompt: 'Tell me about edam' }));
    assert.equal((await post('deny-only-block-history', { prompt: 'Tell me about brie' })).status, 200);
    badRequest(await post('all-roles', { messages: [{ role: 'system', content: 'the secret is 42' }, { role: 'user', content: 'hi' }] }));
    assert.equal((await post('deny-only-block-history', { messages: [{ role: 'system', content: 'edam' }, { role: 'user', content: 'hi' }] })).status, 200);
  });

  test('a request that is neither a chat nor a completion, or whose messages are malformed, is a bad request', async () => {
    badRequest(await post('deny-only-block-history', { input: 'edam' }));
    badRequest(await post('deny-only-block-history', { messages: [{ content: 'no role' }] }));
    badRequest(await post('deny-only-block-history', { messages: [{ role: 'user', content: [{ type: 'text', text: 'parts' }] }] }));
  });

  test('a body that is not JSON, or larger than max_request_body_size', async () => {
    const message = { error: { message: 'this LLM route only supports application/json requests' } };
    const form = await post('deny-only-block-history', 'prompt=edam', { 'content-type': 'application/x-www-form-urlencoded' });
    assert.equal(form.status, 400);
    assert.deepEqual(form.json(), message);
    const large = await post('small', { prompt: 'y'.repeat(100) });
    assert.equal(large.status, 400);
    assert.deepEqual(large.json(), message);
  });

  test('patterns run in linear time: a prompt crafted against backtracking is answered at once', async () => {
    assert.equal((await post('pathological', { prompt: `${'a'.repeat(50_000)}b` })).status, 200);
    assert.equal((await post('pathological', { prompt: `${'word '.repeat(1_000)}?` })).status, 200);
  });

  test('in front of ai-proxy, a refused prompt never reaches the provider', async () => {
    const before = env.provider.requests.length;
    badRequest(await post('proxied', shop(['user', 'edam please'])));
    assert.equal(env.provider.requests.length, before);
    const res = await post('proxied', shop(['user', 'brie please']));
    assert.equal(res.status, 200, res.text);
    assert.equal(res.json().choices[0].message.content, 'You said: brie please');
  });
});

describe('ai-prompt-guard config (00-config_spec.lua)', () => {
  test("Kong's checks and messages", async () => {
    const atLeastOne = "config: at least one of these fields must be non-empty: 'config.allow_patterns', 'config.deny_patterns'";
    assert.deepEqual(await pluginConfigErrors('ai-prompt-guard', {}), [atLeastOne]);
    assert.deepEqual(await pluginConfigErrors('ai-prompt-guard', { allow_patterns: [], deny_patterns: [] }), [atLeastOne]);
    assert.deepEqual(await pluginConfigErrors('ai-prompt-guard', { allow_patterns: ['x'.repeat(501)] }), ['config.allow_patterns[0]: length must be at most 500']);
    assert.deepEqual(await pluginConfigErrors('ai-prompt-guard', { allow_patterns: Array.from({ length: 11 }, (_, i) => `p${i}`) }), ['config.allow_patterns: length must be at most 10']);
    assert.deepEqual(await pluginConfigErrors('ai-prompt-guard', { allow_patterns: ['wat'], allow_all_conversation_history: true, match_all_roles: true }), [
      "config: failed conditional validation given value of field 'config.match_all_roles'",
      'config.allow_all_conversation_history: value must be false',
    ]);
  });

  test('a pattern the linear-time engine cannot run is refused at load, with where', async () => {
    const [error] = await pluginConfigErrors('ai-prompt-guard', { deny_patterns: ['(?=lookahead)'] });
    assert.match(error, /^config\.deny_patterns\[0\]: not a valid regex: \(\?=lookahead\) \(/);
    const [empty] = await pluginConfigErrors('ai-prompt-guard', { deny_patterns: ['[]'] });
    assert.match(empty, /^config\.deny_patterns\[0\]: not a valid regex: \[\]/);
  });
});
