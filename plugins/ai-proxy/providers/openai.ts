/**
 * Providers that speak OpenAI's format (Kong's openai and azure drivers, and mistral or llama2 with the
 * `openai` format): the request gets the configured model and options, the answer and its stream pass unchanged.
 */
import { withConfigDefaults, type Driver, type Model, type OpenAiRequest } from './driver.ts';

/** Kong's operation_map for openai. */
const PATHS = { 'llm/v1/chat': '/v1/chat/completions', 'llm/v1/completions': '/v1/completions', preserve: '' } as const;
const AZURE_PATHS = { 'llm/v1/chat': '/chat/completions', 'llm/v1/completions': '/completions' } as const;

/** An OpenAI-format provider served at `origin` by default (none: a self-hosted one, upstream_url required). */
export function openAiFormat(origin: string | undefined): Driver {
  return {
    routes: ['llm/v1/chat', 'llm/v1/completions'],
    defaultUrl: (route) => (origin === undefined ? undefined : origin + PATHS[route]),
    headers: () => ({}),
    toProvider: openAiBody,
  };
}

/** Kong's openai to_format: the configured model and options win; top_k, which OpenAI has not, goes. */
export function openAiBody(request: OpenAiRequest, model: Model): Record<string, unknown> {
  // Kong: "explicitly remove unsupported default" (top_k).
  const { top_k: _unsupported, ...body } = withConfigDefaults(request, model);
  return { ...body, model: model.name, stream: request.stream ?? false };
}

/**
 * Azure OpenAI (Kong's azure driver): OpenAI's format at the deployment's endpoint,
 * `https://<azure_instance>.openai.azure.com/openai/deployments/<azure_deployment_id>/chat/completions`
 * (or `/completions`), with `api-version` in the query (the client's, else azure_api_version).
 */
export const azure: Driver = {
  routes: ['llm/v1/chat', 'llm/v1/completions'],
  defaultUrl(route, model) {
    const { azure_instance: instance, azure_deployment_id: deployment } = model.options;
    const base = `https://${String(instance)}.openai.azure.com:443/openai/deployments/${String(deployment)}`;
    return route === 'preserve' ? base : base + AZURE_PATHS[route];
  },
  headers: () => ({}),
  query: (model, clientQuery) => ({ 'api-version': clientQuery.get('api-version') ?? String(model.options.azure_api_version) }),
  toProvider: openAiBody,
  logMeta: ({ options }) => ({
    azure_instance_id: options.azure_instance,
    azure_deployment_id: options.azure_deployment_id,
    azure_api_version: options.azure_api_version,
  }),
};

