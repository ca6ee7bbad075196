/**
 * Anthropic (Kong's kong/llm/drivers/anthropic.lua): chat goes to the Messages API (the system prompt
 * taken out of the messages, tool calls and results in Anthropic's blocks), completions to the legacy
 * Complete API; answers and the Messages stream come back in OpenAI's format. Beyond Kong, a translated
 * stream ends with OpenAI's usage chunk (Kong keeps the counts for its analytics only), so that what the
 * client reads carries the tokens metering counts.
 */
import { chunkData, DONE, isObject, parsedEvent, usageChunk, usageOf, withConfigDefaults, type Driver, type Model, type OpenAiRequest, type StreamEvent, type StreamTranslator, type Translated, type Usage } from './driver.ts';

const ORIGIN = 'https://api.anthropic.com:443';
const PATHS = { 'llm/v1/chat': '/v1/messages', 'llm/v1/completions': '/v1/complete', preserve: '' } as const;

export const anthropic: Driver = {
  routes: ['llm/v1/chat', 'llm/v1/completions'],
  defaultUrl: (route) => ORIGIN + PATHS[route],
  headers: (model) => ({ 'anthropic-version': String(model.options.anthropic_version) }),
  toProvider(request, model, route) {
    const merged = withConfigDefaults(request, model);
    const common = { temperature: merged.temperature, model: model.name, stream: request.stream ?? false };
    if (route === 'llm/v1/completions') return { ...common, prompt: `Human: ${String(request.prompt)}\n\nAssistant:`, max_tokens_to_sample: merged.max_tokens };
    const { messages, system } = toClaudeMessages(request.messages as OpenAiRequest[]);
    return {
      ...common,
      messages,
      system,
      max_tokens: merged.max_tokens,
      tools: Array.isArray(request.tools) ? toTools(request.tools) : undefined,
      tool_choice: request.tool_choice === undefined ? undefined : toToolChoice(request.tool_choice),
    };
  },
  fromProvider: (answer, _model, route) => (route === 'llm/v1/chat' ? chatAnswer(answer) : completionAnswer(answer)),
  // Kong translates the Messages stream only (no transformer for the Complete API's).
  stream: { framing: 'sse', routes: ['llm/v1/chat'], translator: (model) => new MessagesStream(model) },
};

/** Kong's kong_messages_to_claude_messages: a role other than user, assistant and tool is the system prompt (the last one wins). */
function toClaudeMessages(messages: OpenAiRequest[]): { messages: unknown[]; system: unknown } {
  let system: unknown;
  const out: unknown[] = [];
  for (const message of messages) {
    if (!isObject(message)) continue;
    if (message.role === 'assistant' && Array.isArray(message.tool_calls)) out.push({ role: 'assistant', content: message.tool_calls.map(toolUse) });
    else if (message.role === 'tool') out.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: message.tool_call_id, content: message.content }] });
    else if (message.role === 'assistant' || message.role === 'user') out.push(message);
    else system = message.content;
  }
  return { messages: out, system };
}

function toolUse(call: Record<string, any>): unknown {
  let input: unknown = {};
  try {
    input = JSON.parse(String(call?.function?.arguments ?? '{}'));
  } catch {
    // Kong's cjson.decode gives nil for arguments that are not JSON: no input.
    input = undefined;
  }
  return { type: 'tool_use', id: call?.id, name: call?.function?.name, input };
}

function toTools(tools: unknown[]): unknown[] {
  return tools
    .filter((t): t is Record<string, any> => isObject(t) && isObject(t.function))
    .map(({ function: { parameters, ...rest } }) => ({ ...rest, input_schema: parameters }));
}

function toToolChoice(choice: unknown): unknown {
  if (choice === 'required') return { type: 'any' };
  if (choice === 'none' || choice === 'auto') return { type: choice };
  if (isObject(choice) && choice.type === 'function' && typeof choice.function?.name === 'string') return { type: 'tool', name: choice.function.name };
  return undefined;
}

function chatAnswer(answer: unknown): Translated {
  if (!isObject(answer) || !Array.isArray(answer.content)) return { error: "'content' not in anthropic://llm/v1/chat response" };
  const blocks = answer.content.filter(isObject);
  const text = blocks.filter((b) => typeof b.text === 'string').map((b) => b.text).join('\n');
  const toolCalls = blocks.filter((b) => b.type === 'tool_use').map((b) => ({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input) } }));
  const usage = isObject(answer.usage) ? usageOf(answer.usage.input_tokens, answer.usage.output_tokens) : undefined;
  const body = {
    choices: [{ index: 0, message: { role: 'assistant', content: text, tool_calls: toolCalls.length > 0 ? toolCalls : undefined }, finish_reason: answer.stop_reason }],
    usage: usage ?? 'no usage data returned from upstream',
    model: answer.model,
    object: 'chat.completion',
  };
  return { body, usage };
}

function completionAnswer(answer: unknown): Translated {
  if (!isObject(answer) || answer.completion === undefined) return { error: "'completion' not in anthropic://llm/v1/chat response" };
  return { body: { choices: [{ index: 0, text: answer.completion, finish_reason: answer.stop_reason }], model: answer.model, object: 'text_completion' } };
}

/** The Messages API's stream (message_start, content_block_*, message_delta, message_stop) as OpenAI chunks. */
class MessagesStream implements StreamTranslator {
  private id: unknown;
  private promptTokens: unknown;
  private completionTokens: unknown;

  constructor(private readonly model: Model) {}

  translate({ event, data }: StreamEvent): string[] {
    const payload = parsedEvent(data);
    if (payload === undefined) return [];
    switch (event) {
      case 'message_start':
        return isObject(payload.message) ? [this.start(payload.message)] : [];
      case 'content_block_start':
      case 'content_block_delta':
        return [this.delta(payload)];
      case 'message_delta':
        if (isObject(payload.usage)) this.completionTokens = payload.usage.output_tokens;
        return [];
      case 'message_stop':
        return [usageChunk(this.id, this.model.name, usageOf(this.promptTokens, this.completionTokens)), DONE];
      default:
        return [];
    }
  }

  usage(): Usage | undefined {
    return this.promptTokens === undefined && this.completionTokens === undefined ? undefined : usageOf(this.promptTokens, this.completionTokens);
  }

  private start(message: Record<string, any>): string {
    this.id = message.id;
    this.promptTokens = message.usage?.input_tokens;
    this.completionTokens = message.usage?.output_tokens;
    return chunkData({
      choices: [{ delta: { content: '', role: message.role }, index: 0, logprobs: null }],
      id: message.id,
      model: this.model.name,
      object: 'chat.completion.chunk',
      system_fingerprint: null,
    });
  }

  private delta(payload: Record<string, any>): string {
    const text = typeof payload.delta?.text === 'string' ? payload.delta.text : '';
    return chunkData({
      choices: [{ delta: { content: text }, index: 0, finish_reason: null, logprobs: null }],
      id: this.id,
      model: this.model.name,
      object: 'chat.completion.chunk',
    });
  }
}
