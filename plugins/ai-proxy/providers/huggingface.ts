/**
 * Hugging Face's Inference API (Kong's kong/llm/drivers/huggingface.lua): the model's URL,
 * `https://api-inference.huggingface.co/models/<model>` (or upstream_url), with `/v1/chat/completions`
 * after it for chat; the options as `parameters` (`max_length` for chat, `max_new_tokens` for a prompt,
 * which goes as `inputs`) and `options.use_cache`/`wait_for_model`. Answers (`choices`, or
 * `[{generated_text}]`) come back as Kong shapes them; the SSE stream is translated event by event.
 */
import { chunkData, DONE, isObject, parsedEvent, usageChunk, usageOf, withConfigDefaults, type Driver, type Model, type StreamEvent, type StreamTranslator, type Translated, type TranslatedRoute, type Usage } from './driver.ts';

const ORIGIN = 'https://api-inference.huggingface.co:443';
const CHAT_PATH = '/v1/chat/completions';

const withRoute = (base: string, route: string) => (route === 'llm/v1/chat' ? base + CHAT_PATH : base);

export const huggingface: Driver = {
  routes: ['llm/v1/chat', 'llm/v1/completions'],
  defaultUrl: (route, model) => withRoute(`${ORIGIN}/models/${model.name}`, route),
  configuredUrl: (upstreamUrl, route) => withRoute(upstreamUrl, route),
  headers: () => ({}),
  toProvider(request, model, route) {
    const { top_k: topK, top_p: topP, temperature, max_tokens: maxTokens, prompt, ...rest } = withConfigDefaults(request, model);
    const given = isObject(request.parameters) ? request.parameters : {};
    const parameters = {
      ...given,
      top_k: given.top_k ?? topK,
      top_p: given.top_p ?? topP,
      temperature: given.temperature ?? temperature,
      [request.messages !== undefined ? 'max_length' : 'max_new_tokens']: maxTokens,
    };
    const { use_cache: useCache = false, wait_for_model: waitForModel = false } = model.options.huggingface ?? {};
    return {
      ...rest,
      ...(route === 'llm/v1/completions' ? { inputs: prompt } : { prompt }),
      parameters,
      options: { use_cache: useCache, wait_for_model: waitForModel },
      model: model.name,
    };
  },
  fromProvider: (answer, model, route) => translated(answer, model, route),
  stream: { framing: 'sse', routes: ['llm/v1/chat', 'llm/v1/completions'], translator: (model, route) => new HuggingFaceStream(model, route) },
};

/** Kong's from_huggingface: the choices' (or the generated text's) content, `finish_reason: complete`. */
function translated(answer: unknown, model: Model, route: TranslatedRoute): Translated {
  // Text generation answers an array of generations; chat an object.
  const generated: unknown = Array.isArray(answer) && isObject(answer[0]) ? answer[0].generated_text : undefined;
  const object: Record<string, any> = isObject(answer) ? answer : {};
  if (object.error !== undefined || object.message !== undefined) return { error: `API error: ${String(object.error ?? object.message)}` };
  let choices: unknown[];
  if (generated !== undefined) choices = [{ message: { content: generated }, index: 0, finish_reason: 'complete' }];
  else if (Array.isArray(object.choices)) {
    choices = object.choices.map((choice: unknown, index: number) => ({ message: { content: isObject(choice) ? (choice.message?.content ?? '') : '' }, index, finish_reason: 'complete' }));
  } else return { error: 'Invalid response format' };
  const usage = isObject(object.usage) ? usageOf(object.usage.prompt_tokens, object.usage.completion_tokens) : undefined;
  return { body: { model: model.name, object: object.object ?? route, choices, usage: usage ?? {} }, usage };
}

/** Text Generation Inference's events (chat deltas, or generated tokens) as OpenAI chunks. */
class HuggingFaceStream implements StreamTranslator {
  private counted: Usage | undefined;
  private done = false;

  constructor(
    private readonly model: Model,
    private readonly route: TranslatedRoute,
  ) {}

  translate({ data }: StreamEvent): string[] {
    if (data === DONE) return this.finish();
    const event = parsedEvent(data);
    if (!event) return [];
    if (isObject(event.usage)) this.counted = usageOf(event.usage.prompt_tokens, event.usage.completion_tokens);
    if (this.route === 'llm/v1/chat') {
      const content = Array.isArray(event.choices) ? event.choices[0]?.delta?.content : undefined;
      return [chunkData({ choices: [{ delta: { content: content ?? '', role: 'assistant' }, index: 0 }], model: event.model ?? this.model.name, object: 'chat.completion.chunk' })];
    }
    return [chunkData({ choices: [{ text: event.token?.text ?? '', index: 0 }], model: this.model.name, object: 'text_completion' })];
  }

  finish(): string[] {
    if (this.done) return [];
    this.done = true;
    return this.counted ? [usageChunk(undefined, this.model.name, this.counted), DONE] : [DONE];
  }

  usage(): Usage | undefined {
    return this.counted;
  }
}
