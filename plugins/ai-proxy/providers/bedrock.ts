/**
 * Amazon Bedrock's Converse API (Kong's kong/llm/drivers/bedrock.lua), chat only:
 * `https://bedrock-runtime.<region>.amazonaws.com/model/<model>/converse` (`converse-stream` for a
 * stream), SigV4-signed for the `bedrock` service with the configured key or the environment's. Messages
 * become Converse messages (system prompts apart, tool calls as `toolUse`, tool results as `toolResult`),
 * the options `inferenceConfig`, tools `toolConfig`; the answer comes back in OpenAI's format with its
 * `usage`; the stream (AWS's binary event stream) is translated message by message.
 */
import { awsUriEncode, environmentAwsCredentials, signAwsRequest, type AwsCredentials } from '../../../src/pdk/index.ts';
import type { AiProxyConfig } from '../schema.ts';
import { chunkData, DONE, isObject, parsedEvent, usageChunk, usageOf, withConfigDefaults, type Driver, type Model, type OpenAiRequest, type StreamEvent, type StreamTranslator, type Translated, type Usage } from './driver.ts';

const STOP_REASONS: Record<string, string> = { max_tokens: 'length', end_turn: 'stop', tool_use: 'tool_calls', guardrail_intervened: 'guardrail_intervened' };
/** Kong's bedrock_unsupported_system_role_patterns (Lua patterns, as regexes): models without system prompts. */
const NO_SYSTEM_PROMPT = [/amazon.titan/, /cohere.command.*text/, /mistral.mistral.*7b.*instruct/, /mistral.mixtral.*8x7b.*instruct/];

/** The configured region, else the environment's (as Kong reads AWS_REGION, then AWS_DEFAULT_REGION). */
function regionOf(model: Pick<Model, 'options'>): string | undefined {
  return model.options.bedrock?.aws_region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION;
}

function credentialsOf(auth: AiProxyConfig['auth']): AwsCredentials | undefined {
  if (auth?.aws_access_key_id && auth.aws_secret_access_key) return { accessKeyId: auth.aws_access_key_id, secretAccessKey: auth.aws_secret_access_key };
  return environmentAwsCredentials();
}

export const bedrock: Driver = {
  routes: ['llm/v1/chat'],
  defaultUrl(route, model, stream) {
    const origin = `https://bedrock-runtime.${regionOf(model)}.amazonaws.com`;
    return route === 'preserve' ? origin : `${origin}/model/${awsUriEncode(model.name)}/${stream ? 'converse-stream' : 'converse'}`;
  },
  headers: () => ({}),
  toProvider(request, model) {
    const merged = withConfigDefaults(request, model);
    const converted = toMessages(request.messages as unknown[], model);
    if ('refusal' in converted) return converted;
    const native = isObject(request.bedrock) ? request.bedrock : {};
    const tools = Array.isArray(request.tools) ? toTools(request.tools) : [];
    const toolConfig = tools.length > 0 ? { ...native.toolConfig, tools } : native.toolConfig;
    return {
      anthropic_version: model.options.anthropic_version ?? 'bedrock-2023-05-31',
      ...converted,
      inferenceConfig: { maxTokens: merged.max_tokens, stopSequences: merged.stop, temperature: merged.temperature, topP: merged.top_p },
      guardrailConfig: request.guardrailConfig,
      toolConfig,
      additionalModelRequestFields: native.additionalModelRequestFields,
    };
  },
  fromProvider: (answer, model) => chatAnswer(answer, model),
  stream: { framing: 'aws-eventstream', routes: ['llm/v1/chat'], translator: (model) => new ConverseStream(model) },
  sign(request, model, auth) {
    // Checked when the config loaded (configProblem); the environment may have lost them since.
    const credentials = credentialsOf(auth);
    const region = regionOf(model);
    if (!credentials || !region) return undefined;
    const path = request.url.pathname;
    return signAwsRequest({ method: request.method, host: request.url.host, path, query: {}, headers: {}, body: request.body }, credentials, region, 'bedrock', new Date());
  },
  configProblem(config) {
    if (!regionOf({ options: config.model.options ?? {} })) return 'AWS region not specified anywhere: set model.options.bedrock.aws_region, or AWS_REGION';
    if (!credentialsOf(config.auth)) return 'no AWS credentials: set auth.aws_access_key_id and auth.aws_secret_access_key, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY';
    return undefined;
  },
};

const refusal = (why: string) => ({ refusal: `error transforming to bedrock://llm/v1/chat: ${why}` });

function toMessages(messages: unknown[], model: Model): { messages: unknown[]; system?: unknown[] } | { refusal: string } {
  const system: unknown[] = [];
  const out: unknown[] = [];
  for (const m of messages) {
    const message: OpenAiRequest = isObject(m) ? m : {};
    if (message.role === 'system') system.push({ text: message.content });
    else if (message.role === 'tool') {
      const result = jsonOf(message.content);
      if (result === undefined) return refusal('failed to decode function response arguments, not JSON format');
      const json = isObject(result) || Array.isArray(result) ? result : { result };
      out.push({ role: 'user', content: [{ toolResult: { toolUseId: message.tool_call_id, content: [{ json }], status: message.status } }] });
    } else {
      const content = contentOf(message);
      if (typeof content === 'string') return refusal(content);
      out.push({ role: message.role === 'user' || message.role === undefined ? 'user' : 'assistant', content });
    }
  }
  if (system.length === 0) return { messages: out };
  if (NO_SYSTEM_PROMPT.some((pattern) => pattern.test(model.name))) return refusal(`system prompts are unsupported for model '${model.name}`);
  return { messages: out, system };
}

/** A message's content blocks: given ones, the assistant's (last) tool call, or its text; a string says why not. */
function contentOf(message: OpenAiRequest): unknown[] | string {
  if (Array.isArray(message.content)) return message.content;
  if (Array.isArray(message.tool_calls) && message.tool_calls.length > 0) {
    const call = message.tool_calls.at(-1);
    const input = jsonOf(call?.function?.arguments);
    if (input === undefined) return "failed to decode function response arguments from assistant's message, not JSON format";
    return [{ toolUse: { toolUseId: call.id, name: call.function.name, input } }];
  }
  return [{ text: message.content ?? '' }];
}

function jsonOf(text: unknown): unknown {
  if (typeof text !== 'string') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function toTools(tools: unknown[]): unknown[] {
  return tools
    .filter((t): t is Record<string, any> => isObject(t) && isObject(t.function))
    .map(({ function: f }) => ({ toolSpec: { name: f.name, description: f.description, inputSchema: { json: f.parameters } } }));
}

function chatAnswer(answer: unknown, model: Model): Translated {
  const content: unknown = isObject(answer) ? answer.output?.message?.content : undefined;
  if (!isObject(answer) || !Array.isArray(content) || content.length === 0) return { error: 'no generation candidates received from Bedrock, or max_tokens too short' };
  const blocks = content.filter(isObject);
  const toolCalls = blocks
    .filter((b) => isObject(b.toolUse))
    .map(({ toolUse }) => ({ function: { arguments: hasKeys(toolUse.input) ? JSON.stringify(toolUse.input) : undefined, name: toolUse.name }, id: toolUse.toolUseId, type: 'function' }));
  const message = { role: 'assistant', content: blocks[0]?.text, tool_calls: toolCalls.length > 0 ? toolCalls : undefined };
  const usage = isObject(answer.usage) ? usageOf(answer.usage.inputTokens, answer.usage.outputTokens) : undefined;
  const choice = { index: 0, message, finish_reason: STOP_REASONS[String(answer.stopReason)] ?? 'stop' };
  return { body: { choices: [choice], object: 'chat.completion', model: model.name, usage, trace: answer.trace }, usage };
}

function hasKeys(value: unknown): boolean {
  return isObject(value) && Object.keys(value).length > 0;
}

/** Converse's stream events (messageStart, contentBlockStart/Delta, messageStop, metadata) as OpenAI chunks. */
class ConverseStream implements StreamTranslator {
  private counted: Usage | undefined;

  constructor(private readonly model: Model) {}

  translate({ event, data }: StreamEvent): string[] {
    const body = parsedEvent(data);
    if (!body) return [];
    switch (event) {
      case 'messageStart':
        return [this.chunk({ content: '', role: body.role }, { system_fingerprint: null })];
      case 'contentBlockStart':
        if (!isObject(body.start?.toolUse)) return [];
        return [this.chunk({ tool_calls: [{ index: body.contentBlockIndex, id: body.start.toolUse.toolUseId, function: { name: body.start.toolUse.name, arguments: '' } }] })];
      case 'contentBlockDelta':
        if (isObject(body.delta?.toolUse)) {
          return [this.chunk({ tool_calls: [{ index: body.contentBlockIndex, function: { arguments: body.delta.toolUse.input } }] })];
        }
        return [this.chunk({ content: typeof body.delta?.text === 'string' ? body.delta.text : '' })];
      case 'messageStop':
        return [chunkData({ choices: [{ delta: {}, index: 0, finish_reason: STOP_REASONS[String(body.stopReason)] ?? 'stop', logprobs: null }], model: this.model.name, object: 'chat.completion.chunk' })];
      case 'metadata':
        this.counted = usageOf(body.usage?.inputTokens, body.usage?.outputTokens);
        return [usageChunk(undefined, this.model.name, this.counted), DONE];
      default:
        return [];
    }
  }

  usage(): Usage | undefined {
    return this.counted;
  }

  private chunk(delta: object, extra: object = {}): string {
    return chunkData({ choices: [{ delta, index: 0, logprobs: null }], model: this.model.name, object: 'chat.completion.chunk', ...extra });
  }
}
