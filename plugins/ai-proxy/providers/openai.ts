/**
 * Providers that speak OpenAI's format (Kong's openai driver, and mistral or llama2 with the `openai`
 * format): the request gets the configured model and options, the answer and its stream pass unchanged.
 */
import { withConfigDefaults, type Driver } from './driver.ts';

/** Kong's operation_map for openai. */
const PATHS = { 'llm/v1/chat': '/v1/chat/completions', 'llm/v1/completions': '/v1/completions', preserve: '' } as const;

/** An OpenAI-format provider served at `origin` by default (none: a self-hosted one, upstream_url required). */
export function openAiFormat(origin: string | undefined): Driver {
  return {
    defaultUrl: (route) => (origin === undefined ? undefined : origin + PATHS[route]),
    headers: () => ({}),
    toProvider(request, model) {
      // Kong: "explicitly remove unsupported default" (top_k).
      const { top_k: _unsupported, ...body } = withConfigDefaults(request, model);
      return { ...body, model: model.name, stream: request.stream ?? false };
    },
  };
}
