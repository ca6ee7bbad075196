/**
 * Cohere (Kong's kong/llm/drivers/cohere.lua): chat goes to `/v1/chat` as the last message and the rest
 * as `chat_history` (USER or CHATBOT), completions to `/v1/generate`; `top_p` and `top_k` become `p` and
 * `k`. A request with tools goes in OpenAI's format, as Kong sends it. Answers (`text`, `generations`, or
 * a v2 `message`) come back in OpenAI's format with `billed_units` as `usage`; the stream is NDJSON,
 * translated line by line, ending (beyond Kong, as for Anthropic) with a usage chunk before `[DONE]`.
 */
import { chunkData, DONE, isObject, parsedEvent, usageChunk, usageOf, withConfigDefaults, type Driver, type Model, type StreamEvent, type StreamTranslator, type Translated, type TranslatedRoute, type Usage } from './driver.ts';
import { openAiBody } from './openai.ts';

const ORIGIN = 'https://api.cohere.com:443';
const PATHS = { 'llm/v1/chat': '/v1/chat', 'llm/v1/completions': '/v1/generate', preserve: '' } as const;

export const cohere: Driver = {
  routes: ['llm/v1/chat', 'llm/v1/completions'],
  defaultUrl: (route) => ORIGIN + PATHS[route],
  headers: () => ({}),
  toProvider(request, model) {
    if (request.tools !== undefined) return openAiBody(request, model);
    const { top_p: p, top_k: k, messages, ...merged } = withConfigDefaults(request, model);
    const body = { ...merged, p, k, model: model.name, stream: request.stream ?? false };
    return Array.isArray(messages) ? { ...body, ...chatFields(messages) } : body;
  },
  fromProvider: (answer, model, route) => (route === 'llm/v1/chat' ? chatAnswer(answer, model) : completionAnswer(answer, model)),
  stream: { framing: 'ndjson', routes: ['llm/v1/chat', 'llm/v1/completions'], translator: (model, route) => new CohereStream(model, route) },
};

/** All but the last message are the history; the last one's content is the message. */
function chatFields(messages: unknown[]): Record<string, unknown> {
  const history = messages.slice(0, -1).map((m) => {
    const message = isObject(m) ? m : {};
    return { role: message.role === 'assistant' || message.role === 'CHATBOT' ? 'CHATBOT' : 'USER', message: message.content };
  });
  const last = messages.at(-1);
  return { ...(history.length > 0 ? { chat_history: history } : {}), message: isObject(last) ? last.content : undefined };
}

function billedUsage(units: unknown): Usage | undefined {
  return isObject(units) ? usageOf(units.input_tokens, units.output_tokens) : undefined;
}

/** Kong's chat transformer reads every shape Cohere answers with: generate, chat v1, chat v2. */
function chatAnswer(answer: unknown, model: Model): Translated {
  if (!isObject(answer)) return { error: 'failed to decode cohere response' };
  if (answer.prompt !== undefined && Array.isArray(answer.generations)) return generations(answer, model);
  if (answer.text !== undefined) {
    const usage = billedUsage(answer.meta?.billed_units);
    const choice = { index: 0, message: { role: 'assistant', content: answer.text }, finish_reason: 'stop' };
    return { body: { choices: [choice], object: 'chat.completion', model: model.name, id: answer.generation_id, usage }, usage };
  }
  if (isObject(answer.message)) {
    const usage = billedUsage(answer.usage?.billed_units);
    const message = { role: 'assistant', content: answer.message.tool_plan ?? answer.message.content, tool_calls: answer.message.tool_calls };
    return { body: { choices: [{ index: 0, message, finish_reason: answer.finish_reason }], object: 'chat.completion', model: model.name, id: answer.id, usage }, usage };
  }
  return { error: "'text' or 'generations' missing from cohere response body" };
}

function completionAnswer(answer: unknown, model: Model): Translated {
  if (!isObject(answer)) return { error: 'failed to decode cohere response' };
  if (answer.prompt !== undefined && Array.isArray(answer.generations)) return generations(answer, model);
  if (answer.text !== undefined) {
    const counts = isObject(answer.token_count) ? answer.token_count : {};
    const usage = usageOf(counts.prompt_tokens, counts.response_tokens);
    const choice = { index: 0, message: { role: 'assistant', content: answer.text }, finish_reason: 'stop' };
    return { body: { choices: [choice], object: 'chat.completion', model: model.name, id: answer.generation_id, usage }, usage };
  }
  return { error: "'text' or 'generations' missing from cohere response body" };
}

function generations(answer: Record<string, any>, model: Model): Translated {
  const choices = (answer.generations as unknown[]).map((g, index) => ({ index, text: isObject(g) ? g.text : undefined, finish_reason: 'stop' }));
  const usage = billedUsage(answer.meta?.billed_units);
  return { body: { choices, object: 'text_completion', model: model.name, id: answer.id, usage }, usage };
}

/** stream-start, text-generation and stream-end lines as OpenAI chunks. */
class CohereStream implements StreamTranslator {
  private id: unknown;
  private counted: Usage | undefined;

  constructor(
    private readonly model: Model,
    private readonly route: TranslatedRoute,
  ) {}

  translate({ data }: StreamEvent): string[] {
    const event = parsedEvent(data);
    switch (event?.event_type) {
      case 'stream-start':
        this.id = event.generation_id;
        return [chunkData({ choices: [{ delta: { content: '', role: 'assistant' }, index: 0 }], id: this.id, model: this.model.name, object: 'chat.completion.chunk' })];
      case 'text-generation':
        return [this.token(typeof event.text === 'string' ? event.text : '')];
      case 'stream-end':
        this.counted = endUsage(event.response);
        return [usageChunk(this.id, this.model.name, this.counted), DONE];
      default:
        return [];
    }
  }

  usage(): Usage | undefined {
    return this.counted;
  }

  private token(text: string): string {
    const common = { id: this.id, model: this.model.name };
    if (this.route === 'llm/v1/chat') {
      return chunkData({ choices: [{ delta: { content: text }, index: 0, finish_reason: null, logprobs: null }], ...common, object: 'chat.completion.chunk' });
    }
    return chunkData({ choices: [{ text, index: 0, finish_reason: null, logprobs: null }], ...common, object: 'text_completion' });
  }
}

/** The billed units of the final response, else its token counts. */
function endUsage(response: unknown): Usage {
  if (!isObject(response)) return usageOf(0, 0);
  const billed = response.meta?.billed_units;
  if (isObject(billed)) return usageOf(billed.input_tokens, billed.output_tokens);
  return usageOf(response.token_count?.prompt_tokens, response.token_count?.response_tokens);
}
