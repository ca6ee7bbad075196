/**
 * A stand-in LLM provider for docs/ai.md and the ai-proxy tests: it speaks OpenAI's Chat Completions and
 * Completions, Anthropic's Messages and Complete, and Ollama's /api/chat and /api/generate, answering
 * whole or as a stream (SSE, or NDJSON for Ollama), with token counts. Its answer repeats the last user
 * message: "You said: <words>"; a prompt's tokens are its words, the answer's tokens its words.
 *   npm run example:llm-provider        (listens on 127.0.0.1:3400, or PORT, or the port given as argument)
 * SIGTERM or SIGINT closes it and exits 0.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface ProviderRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: Record<string, any>;
}

export interface StandInOptions {
  /** Awaited after a stream's first chunk went out: a test releases the rest once its client has that chunk. */
  afterFirstChunk?: () => Promise<void>;
}

export interface StandInProvider {
  url: string;
  /** What it was sent, oldest first. */
  requests: ProviderRequest[];
  close(): Promise<void>;
}

type Answer = { words: string[]; promptTokens: number; model: string };

export async function startLlmProvider(port = 0, options: StandInOptions = {}): Promise<StandInProvider> {
  const requests: ProviderRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      let body: Record<string, any>;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
      } catch {
        return void res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":"not JSON"}');
      }
      const path = (req.url ?? '/').split('?')[0];
      requests.push({ path, headers: req.headers, body });
      void answer(path, body, res, options).catch(() => res.destroy());
    });
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

async function answer(path: string, body: Record<string, any>, res: http.ServerResponse, options: StandInOptions): Promise<void> {
  const reply = replyTo(body);
  switch (path) {
    case '/v1/chat/completions':
    case '/v1/completions':
      return body.stream ? stream(res, 'text/event-stream', openAiChunks(reply, path, body), options) : json(res, openAiAnswer(reply, path));
    case '/v1/messages':
      return body.stream ? stream(res, 'text/event-stream', anthropicEvents(reply), options) : json(res, anthropicAnswer(reply, body.tools));
    case '/v1/complete':
      return json(res, { type: 'completion', completion: ` ${reply.words.join(' ')}`, stop_reason: 'stop_sequence', model: reply.model });
    case '/api/chat':
    case '/api/generate':
      return body.stream ? stream(res, 'application/x-ndjson', ollamaLines(reply, path), options) : json(res, ollamaAnswer(reply, path));
    default:
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"no such endpoint"}');
  }
}

function replyTo(body: Record<string, any>): Answer {
  const texts: string[] = Array.isArray(body.messages) ? body.messages.map((m: any) => String(m?.content ?? '')) : [String(body.prompt ?? '')];
  if (typeof body.system === 'string') texts.push(body.system);
  const lastUser = Array.isArray(body.messages) ? [...body.messages].reverse().find((m: any) => m?.role === 'user')?.content : body.prompt;
  const words = (text: string) => text.split(/\s+/).filter(Boolean);
  return { words: ['You', 'said:', ...words(String(lastUser ?? ''))], promptTokens: texts.flatMap(words).length, model: String(body.model ?? 'stand-in') };
}

function json(res: http.ServerResponse, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
}

async function stream(res: http.ServerResponse, type: string, parts: string[], options: StandInOptions): Promise<void> {
  res.writeHead(200, { 'content-type': type, 'cache-control': 'no-cache' });
  res.write(parts[0]);
  await options.afterFirstChunk?.();
  for (const part of parts.slice(1)) res.write(part);
  res.end();
}

function openAiAnswer({ words, promptTokens, model }: Answer, path: string): unknown {
  const text = words.join(' ');
  const choice = path === '/v1/completions' ? { index: 0, text, finish_reason: 'stop' } : { index: 0, message: { role: 'assistant', content: text }, finish_reason: 'stop' };
  return {
    id: 'cmpl-1', object: path === '/v1/completions' ? 'text_completion' : 'chat.completion', created: 1, model, choices: [choice],
    usage: { prompt_tokens: promptTokens, completion_tokens: words.length, total_tokens: promptTokens + words.length },
  };
}

function openAiChunks({ words, promptTokens, model }: Answer, path: string, body: Record<string, any>): string[] {
  const event = (value: unknown) => `data: ${JSON.stringify(value)}\n\n`;
  const chunk = (word: string) => (path === '/v1/completions'
    ? { id: 'cmpl-1', object: 'text_completion', model, choices: [{ index: 0, text: word }] }
    : { id: 'cmpl-1', object: 'chat.completion.chunk', model, choices: [{ index: 0, delta: { content: word } }] });
  const parts = words.map((w, i) => event(chunk(i === 0 ? w : ` ${w}`)));
  if (body.stream_options?.include_usage) parts.push(event({ id: 'cmpl-1', object: 'chat.completion.chunk', model, choices: [], usage: { prompt_tokens: promptTokens, completion_tokens: words.length, total_tokens: promptTokens + words.length } }));
  return [...parts, 'data: [DONE]\n\n'];
}

/** With tools offered, the answer also calls the first one with what the user said. */
function anthropicAnswer({ words, promptTokens, model }: Answer, tools: unknown): unknown {
  const tool = Array.isArray(tools) ? tools[0] : undefined;
  const call = tool ? [{ type: 'tool_use', id: 'toolu_1', name: tool.name, input: { query: words.slice(2).join(' ') } }] : [];
  return {
    id: 'msg_1', type: 'message', role: 'assistant', model, content: [{ type: 'text', text: words.join(' ') }, ...call],
    stop_reason: tool ? 'tool_use' : 'end_turn', stop_sequence: null, usage: { input_tokens: promptTokens, output_tokens: words.length },
  };
}

function anthropicEvents({ words, promptTokens, model }: Answer): string[] {
  const event = (type: string, data: unknown) => `event: ${type}\ndata: ${JSON.stringify({ type, ...(data as object) })}\n\n`;
  return [
    event('message_start', { message: { id: 'msg_1', type: 'message', role: 'assistant', model, content: [], usage: { input_tokens: promptTokens, output_tokens: 1 } } }),
    event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    event('ping', {}),
    ...words.map((w, i) => event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: i === 0 ? w : ` ${w}` } })),
    event('content_block_stop', { index: 0 }),
    event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: words.length } }),
    event('message_stop', {}),
  ];
}

function ollamaAnswer({ words, promptTokens, model }: Answer, path: string): unknown {
  const text = words.join(' ');
  const output = path === '/api/chat' ? { message: { role: 'assistant', content: text } } : { response: text };
  return { model, created_at: '2026-01-01T00:00:00Z', ...output, done: true, prompt_eval_count: promptTokens, eval_count: words.length };
}

function ollamaLines({ words, promptTokens, model }: Answer, path: string): string[] {
  const line = (value: unknown) => `${JSON.stringify(value)}\n`;
  const part = (text: string) => (path === '/api/chat' ? { message: { role: 'assistant', content: text } } : { response: text });
  return [
    ...words.map((w, i) => line({ model, created_at: '2026-01-01T00:00:00Z', ...part(i === 0 ? w : ` ${w}`), done: false })),
    line({ model, created_at: '2026-01-01T00:00:00Z', ...part(''), done: true, prompt_eval_count: promptTokens, eval_count: words.length }),
  ];
}

// Run as a program (not imported by a test).
if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const provider = await startLlmProvider(Number(process.argv[2] ?? process.env.PORT ?? 3400));
  console.log(`stand-in LLM provider listening on ${provider.url}`);
  // Stopped by a script or a service manager: open connections must not keep it up.
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.once(signal, () => void provider.close().then(() => process.exit(0)));
}
