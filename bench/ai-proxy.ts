/**
 * ai-proxy's relay cost: a chat completion through ai-proxy to the stand-in provider (OpenAI's format,
 * passed through; Anthropic's, translated both ways) against the same request proxied to the same
 * provider without the plugin. The provider runs as a child process of its own.
 */
import { bestOfAlternating, load, printTable, startChild, type LoadResult } from './lib.ts';
import { startTollgate } from './proxy.ts';

const CHAT = JSON.stringify({ messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'What is the capital of France?' }] });

function benchConfig(provider: string): Record<string, any> {
  const proxied = (name: string, config: Record<string, unknown>) => ({ name, paths: [`/${name}`], plugins: [{ name: 'ai-proxy', config }] });
  return {
    gateway: { proxy_listen: ['127.0.0.1:0'], admin_listen: ['127.0.0.1:0'], access_log: false },
    services: [
      // The plain route: the same request to the provider's OpenAI endpoint, untouched.
      { name: 'plain', url: `${provider}/v1/chat/completions`, routes: [{ name: 'plain', paths: ['/plain'] }] },
      {
        name: 'llm',
        url: provider,
        routes: [
          proxied('openai', { route_type: 'llm/v1/chat', model: { provider: 'openai', name: 'gpt-4o-mini', options: { upstream_url: `${provider}/v1/chat/completions` } } }),
          proxied('anthropic', {
            route_type: 'llm/v1/chat',
            auth: { header_name: 'x-api-key', header_value: 'bench-key' },
            model: { provider: 'anthropic', name: 'claude-3', options: { max_tokens: 64, anthropic_version: '2023-06-01', upstream_url: `${provider}/v1/messages` } },
          }),
        ],
      },
    ],
  };
}

export async function run(): Promise<void> {
  const provider = await startChild('../examples/llm-provider.ts', ['0']);
  const tollgate = await startTollgate(benchConfig(provider.urls[0]), 2);
  const [proxy] = tollgate.urls;
  try {
    const pid = tollgate.process.pid;
    const post = (path: string) => () => load({ url: `${proxy}${path}`, method: 'POST', headers: { 'content-type': 'application/json' }, body: CHAT, pid });
    const [plain, openai, anthropic] = await bestOfAlternating([post('/plain'), post('/openai'), post('/anthropic')]);
    const rows: [string, LoadResult][] = [
      ['plain route to the provider, no plugin', plain],
      ['ai-proxy, OpenAI format (passed through)', openai],
      ['ai-proxy, Anthropic (translated both ways)', anthropic],
    ];
    printTable('ai-proxy: chat completions to a stand-in provider, 50 keep-alive connections, 5 s, best of 2 alternating rounds (ratio to the plain route)', rows, rows[0][1]);
    console.log("(the plain route streams the request body upstream; ai-proxy reads it whole first, and sends it from memory.)");
  } finally {
    await Promise.all([provider.stop(), tollgate.stop()]);
  }
}
