/**
 * Ollama's format (Kong's to_ollama and from_ollama in kong/llm/drivers/shared.lua, for llama2 and
 * mistral with the `ollama` format): `/api/chat` messages or an `/api/generate` prompt, the model options
 * as Ollama's `options`; answers carry `prompt_eval_count` and `eval_count`, read as OpenAI's usage; the
 * stream is NDJSON, translated line by line into OpenAI chunks, ending with a usage chunk (beyond Kong,
 * as for Anthropic) and `[DONE]`.
 */
import { chunkData, DONE, isObject, parsedEvent, usageChunk, usageOf, withConfigDefaults, type Driver, type Model, type StreamEvent, type StreamTranslator, type TranslatedRoute, type Usage } from './driver.ts';

/** An Ollama-format provider served at `origin` by default (none: self-hosted, upstream_url required). */
export function ollamaFormat(origin: string | undefined): Driver {
  return {
    routes: ['llm/v1/chat', 'llm/v1/completions'],
    defaultUrl: (route) => (origin === undefined || route === 'preserve' ? origin : `${origin}/v1/chat/completions`),
    headers: () => ({}),
    toProvider(request, model) {
      const merged = withConfigDefaults(request, model);
      return {
        ...(request.messages !== undefined ? { messages: request.messages } : { prompt: request.prompt }),
        stream: request.stream ?? false,
        model: model.name,
        tools: request.tools,
        tool_choice: request.tool_choice,
        options: { num_predict: merged.max_tokens, temperature: merged.temperature, top_p: merged.top_p, top_k: merged.top_k },
      };
    },
    fromProvider(answer, model, route) {
      if (!isObject(answer)) return { error: 'failed to decode ollama response' };
      const usage = usageOf(answer.prompt_eval_count, answer.eval_count);
      // Kong: an answer that used every token it was allowed stopped for its length.
      const stop = answer.eval_count !== undefined && answer.eval_count === (model.options.max_tokens ?? -1) ? 'length' : 'stop';
      const choice = route === 'llm/v1/chat' ? { finish_reason: answer.finish_reason ?? stop, index: 0, message: answer.message } : { index: 0, text: answer.response };
      const body = { model: answer.model, created: answer.created_at, usage, object: route === 'llm/v1/chat' ? 'chat.completion' : 'text_completion', choices: [choice] };
      return { body, usage };
    },
    stream: { framing: 'ndjson', routes: ['llm/v1/chat', 'llm/v1/completions'], translator: (model, route) => new OllamaStream(model, route) },
  };
}

class OllamaStream implements StreamTranslator {
  private counted: Usage | undefined;

  constructor(
    private readonly model: Model,
    private readonly route: TranslatedRoute,
  ) {}

  translate({ data }: StreamEvent): string[] {
    const line = parsedEvent(data);
    if (line === undefined) return [];
    if (line.done) {
      this.counted = usageOf(line.prompt_eval_count, line.eval_count);
      return [usageChunk(undefined, String(line.model ?? this.model.name), this.counted), DONE];
    }
    if (this.route === 'llm/v1/chat') {
      return [chunkData({ choices: [{ delta: { content: line.message?.content ?? '' }, index: 0 }], model: line.model, object: 'chat.completion.chunk' })];
    }
    return [chunkData({ choices: [{ text: line.response ?? '', index: 0 }], model: line.model, object: 'text_completion' })];
  }

  usage(): Usage | undefined {
    return this.counted;
  }
}
