/**
 * Google Gemini (Kong's kong/llm/drivers/gemini.lua), chat only: the public API's
 * `/v1beta/models/<model>:generateContent`, or Vertex AI's when `model.options.gemini` names the
 * endpoint, project and location; `:streamGenerateContent` for a stream, which Gemini sends as one JSON
 * array, element by element. Messages become `contents` (assistant as `model`, system prompts joined
 * into `systemInstruction`, image parts as inline or file data), the options `generationConfig`, tools
 * `function_declarations`; candidates come back as OpenAI's choices, `usageMetadata` as `usage`.
 */
import { chunkData, DONE, isObject, parsedEvent, usageChunk, usageOf, withConfigDefaults, type Driver, type Model, type OpenAiRequest, type StreamEvent, type StreamTranslator, type Translated, type Usage } from './driver.ts';

const PUBLIC_ORIGIN = 'https://generativelanguage.googleapis.com';
const ROLES: Record<string, string> = { system: 'system', user: 'user', assistant: 'model' };

export const gemini: Driver = {
  routes: ['llm/v1/chat'],
  defaultUrl(route, model, stream) {
    const operation = stream ? 'streamGenerateContent' : 'generateContent';
    const vertex = model.options.gemini;
    if (vertex?.api_endpoint && vertex.project_id && vertex.location_id) {
      const origin = `https://${vertex.api_endpoint}`;
      return route === 'preserve' ? origin : `${origin}/v1/projects/${vertex.project_id}/locations/${vertex.location_id}/publishers/google/models/${model.name}:${operation}`;
    }
    return route === 'preserve' ? PUBLIC_ORIGIN : `${PUBLIC_ORIGIN}/v1beta/models/${model.name}:${operation}`;
  },
  headers: () => ({}),
  toProvider(request, model) {
    const merged = withConfigDefaults(request, model);
    const contents = toContents(request.messages as unknown[], model);
    if ('refusal' in contents) return contents;
    return {
      ...contents,
      generationConfig: {
        maxOutputTokens: merged.max_tokens,
        stopSequences: merged.stop,
        temperature: merged.temperature,
        topK: merged.top_k,
        topP: merged.top_p,
      },
      tools: Array.isArray(request.tools) ? toTools(request.tools) : undefined,
      tool_config: request.tool_config,
    };
  },
  fromProvider: (answer, model) => chatAnswer(answer, model),
  stream: { framing: 'json-array', routes: ['llm/v1/chat'], translator: (model) => new GeminiStream(model) },
};

const refusal = (why: string) => ({ refusal: `error transforming to gemini://llm/v1/chat: ${why}` });

/** The messages as Gemini's contents and system instruction, or Kong's refusal of one it cannot translate. */
function toContents(messages: unknown[], model: Model): { contents: unknown[]; systemInstruction?: unknown } | { refusal: string } {
  const contents: unknown[] = [];
  const system: string[] = [];
  const toolNames = new Map<unknown, unknown>();
  for (const [i, m] of messages.entries()) {
    const message: OpenAiRequest = isObject(m) ? m : {};
    if (message.role === 'system') system.push(typeof message.content === 'string' ? message.content : '');
    else if (message.role === 'tool') {
      const name = toolNames.get(message.tool_call_id) ?? message.name;
      contents.push({ role: 'function', parts: [{ function_response: { response: { content: [message.content] }, name } }] });
    } else if (message.role === 'assistant' && Array.isArray(message.tool_calls) && message.tool_calls.length > 0) {
      const calls = message.tool_calls.filter(isObject);
      for (const call of calls) toolNames.set(call.id, call.function?.name);
      contents.push({ role: 'function', parts: calls.map((call) => ({ function_call: { name: call.function?.name } })) });
    } else {
      const parts = toParts(message.content, i + 1);
      if (typeof parts === 'string') return refusal(parts);
      contents.push({ role: ROLES[String(message.role ?? 'user')], parts });
    }
  }
  if (system.length === 0) return { contents };
  if (model.name.startsWith('gemini-1.0')) return refusal("system prompts aren't supported on gemini-1.0 models");
  return { contents, systemInstruction: { parts: [{ text: system.join('') }] } };
}

/** A message's content as Gemini parts, or why it cannot be. */
function toParts(content: unknown, position: number): unknown[] | string {
  if (typeof content === 'string') return [{ text: content }];
  if (!Array.isArray(content)) return [];
  if (content.length === 0) return `message at position ${position} does not match expected array format`;
  const parts: unknown[] = [];
  for (const [j, part] of content.entries()) {
    const converted = toPart(part);
    if (converted === undefined) return `message at position ${position}, part at position ${j + 1} does not match expected OpenAI format`;
    if (typeof converted === 'string') return converted;
    parts.push(converted);
  }
  return parts;
}

/** Kong's openai_part_to_gemini_part: text, or an image as inline data (a data: URL) or a file's URI. */
function toPart(part: unknown): object | string | undefined {
  if (!isObject(part)) return undefined;
  if (part.type === 'text') return typeof part.text === 'string' ? { text: part.text } : "message part type is 'text' but is missing .text block";
  if (part.type !== 'image_url') return `cannot transform part of type '${String(part.type)}' to Gemini format`;
  const url = part.image_url?.url;
  if (typeof url !== 'string') return "message part type is 'image_url' but is missing .image_url.url block";
  if (url.length < 10) return 'could not decode OpenAI image-part, image URL is less than 10 bytes, which is not parsable';
  const data = /^data:([^;,]*);([^,]*),(.*)$/s.exec(url);
  return data ? { inlineData: { data: data[3], mimeType: data[1] } } : { fileData: { fileUri: url, mimeType: 'image/generic' } };
}

function toTools(tools: unknown[]): unknown {
  const declarations = tools.filter((t): t is Record<string, any> => isObject(t) && isObject(t.function)).map((t) => t.function);
  return declarations.length > 0 ? [{ function_declarations: declarations }] : undefined;
}

function firstCandidate(answer: Record<string, any>): Record<string, any> | undefined {
  return Array.isArray(answer.candidates) && isObject(answer.candidates[0]) ? answer.candidates[0] : undefined;
}

function partsOf(candidate: Record<string, any> | undefined): Record<string, any>[] {
  return Array.isArray(candidate?.content?.parts) ? candidate.content.parts.filter(isObject) : [];
}

function toolCalls(parts: Record<string, any>[]): unknown[] {
  return parts.filter((p) => isObject(p.functionCall)).map((p) => ({ type: 'function', function: { name: p.functionCall.name, arguments: JSON.stringify(p.functionCall.args ?? {}) } }));
}

function usageMetadata(answer: Record<string, any>): Usage | undefined {
  return isObject(answer.usageMetadata) ? usageOf(answer.usageMetadata.promptTokenCount, answer.usageMetadata.candidatesTokenCount) : undefined;
}

function chatAnswer(answer: unknown, model: Model): Translated {
  const candidate = isObject(answer) ? firstCandidate(answer) : undefined;
  if (!isObject(answer) || !candidate) return { error: 'no generation candidates received from Gemini, or max_tokens too short' };
  const parts = partsOf(candidate);
  const usage = usageMetadata(answer);
  let choice: unknown;
  if (typeof parts[0]?.text === 'string') {
    choice = { index: 0, message: { role: 'assistant', content: parts[0].text }, finish_reason: String(candidate.finishReason ?? '').toLowerCase() };
  } else if (parts[0]?.functionCall) {
    choice = { index: 0, message: { role: 'assistant', tool_calls: toolCalls(parts) }, finish_reason: 'tool_calls' };
  }
  return { body: { choices: choice ? [choice] : [], model: model.name, object: 'chat.completion', usage }, usage };
}

/** The elements of Gemini's streamed array as OpenAI chunks; the array's end is the stream's. */
class GeminiStream implements StreamTranslator {
  private counted: Usage | undefined;

  constructor(private readonly model: Model) {}

  translate({ data }: StreamEvent): string[] {
    const event = parsedEvent(data);
    if (!event) return [];
    this.counted = usageMetadata(event) ?? this.counted;
    const candidate = firstCandidate(event);
    const parts = partsOf(candidate);
    const finish = candidate?.finishReason ?? null;
    if (typeof parts[0]?.text === 'string') return [this.chunk({ content: parts[0].text, role: 'assistant' }, finish)];
    if (parts[0]?.functionCall) return [this.chunk({ tool_calls: toolCalls(parts) }, finish)];
    return [];
  }

  finish(): string[] {
    return [usageChunk(undefined, this.model.name, this.counted ?? usageOf(0, 0)), DONE];
  }

  usage(): Usage | undefined {
    return this.counted;
  }

  private chunk(delta: object, finish: unknown): string {
    return chunkData({ model: this.model.name, object: 'chat.completion.chunk', choices: [{ delta, index: 0, finish_reason: finish }] });
  }
}
