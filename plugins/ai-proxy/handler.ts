/**
 * Kong's ai-proxy (kong/plugins/ai-proxy/handler.lua and the shared filters of kong/llm/plugin/): the
 * client speaks OpenAI's format; the request is checked as Kong checks it (400 `{"error":{"message"}}`
 * with Kong's messages), translated for the provider, and sent to the provider's endpoint with its
 * auth; a 200 answer comes back translated to OpenAI's format, streams event by event. The answer the
 * client reads carries OpenAI's `usage`, which is what metering-and-billing meters as AI tokens.
 */
import type { AccessContext, LogContext, PluginRuntime } from '../../src/pdk/index.ts';
import { framerFor } from './framing.ts';
import { driverFor, type Driver, type Model, type OutgoingRequest, type TranslatedRoute } from './providers/index.ts';
import { readOpenAiRequest, type OpenAiRequest } from './request.ts';
import type { AiProxyConfig, RouteType } from './schema.ts';
import { JsonTranslation, StreamTranslation, type AnswerFacts } from './translation.ts';

/** What `prepare` settles once per instance: the driver. */
export interface Prepared {
  driver: Driver;
}

/** What access tells the response and log phases of one request. */
interface Proxied {
  model: Model;
  stream: boolean;
  requestBody: string;
  facts: AnswerFacts;
}

const PROXIED = 'ai-proxy';
/**
 * A model name a client may choose (without model.name in the config): names of every provider's form
 * (`gpt-4o`, `ft:gpt-4o:org::id`, `mistralai/Mistral-7B`, `anthropic.claude-3-v1:0`, an ARN), never a
 * dot segment or a character that could take the provider's URL elsewhere (`?`, `#`, `%`, `\\`).
 */
const MODEL_NAME = /^(?!.*(?:^|\/)\.{1,2}(?:\/|$))[\w.:@+-]+(?:\/[\w.:@+-]+)*$/;
/** Kong's clear_response_headers: the providers whose JSON answer loses its Set-Cookie. */
const DROPS_SET_COOKIE = new Set(['openai', 'azure', 'mistral', 'gemini', 'bedrock']);

export function prepare(config: AiProxyConfig): Prepared {
  return { driver: driverFor(config.model) };
}

export function createRuntime(): PluginRuntime<AiProxyConfig, Prepared> {
  return {
    async access(ctx, config, plugin) {
      const read = await readOpenAiRequest(ctx, config.max_request_body_size);
      if (!read) return refuse(ctx, 'content-type header does not match request body, or bad JSON formatting');
      const { text, request } = read;
      const refusal = requestProblem(request, config);
      if (refusal) return refuse(ctx, refusal);
      const name = config.model.name ?? (typeof request.model === 'string' ? request.model : '');
      const model: Model = { provider: config.model.provider, name, options: config.model.options ?? {} };
      const stream = Boolean(request.stream) || config.response_streaming === 'always';
      const untranslatable = stream && streamProblem(plugin.prepared.driver, model, config.route_type);
      if (untranslatable) return refuse(ctx, untranslatable);
      if (stream) request.stream = true;
      const { driver } = plugin.prepared;
      let { body } = read;
      if (config.route_type !== 'preserve') {
        const translated = driver.toProvider(request, model, config.route_type);
        if ('refusal' in translated) return refuse(ctx, String(translated.refusal));
        body = Buffer.from(JSON.stringify({ ...translated, ...bodyAuth(request, config) }));
        ctx.setUpstreamBody(body);
        ctx.setUpstreamHeader('content-type', 'application/json');
      }
      sendToProvider(ctx, config, driver, model, { stream, body });
      ctx.shared[PROXIED] = { model, stream, requestBody: text, facts: {} } satisfies Proxied;
    },

    response(ctx, config, head, plugin) {
      const proxied = ctx.shared[PROXIED] as Proxied | undefined;
      if (!proxied || head.source !== 'service' || head.status !== 200) return;
      const { model, stream, facts } = proxied;
      if (config.model_name_header && model.name) head.headers['x-kong-llm-model'] = `${model.provider}/${model.name}`;
      if (!stream && DROPS_SET_COOKIE.has(model.provider)) delete head.headers['set-cookie'];
      if (config.route_type === 'preserve' || !head.transformBody) return;
      const { driver } = plugin.prepared;
      if (stream) {
        head.headers['content-type'] = 'text/event-stream';
        const { stream: framed } = driver;
        if (framed) head.transformBody(new StreamTranslation(framerFor(framed.framing), framed.translator(model, config.route_type), facts));
      } else if (driver.fromProvider) {
        head.headers['content-type'] = 'application/json';
        head.transformBody(new JsonTranslation(driver, model, config.route_type, facts));
      }
    },

    log(ctx, config, plugin) {
      const proxied = ctx.shared[PROXIED] as Proxied | undefined;
      if (proxied && config.logging.log_statistics) logStatistics(ctx, config, plugin.prepared.driver, proxied);
    },
  };
}

/** Kong's checks of the request (normalize-request.lua, llm.is_compatible), in its order; undefined when it passes. */
function requestProblem(request: OpenAiRequest, config: AiProxyConfig): string | undefined {
  const route = config.route_type;
  if (route !== 'preserve' && !hasPrompts(request)) return "request body doesn't contain valid prompts";
  const name = config.model.name ?? (typeof request.model === 'string' ? request.model : undefined);
  if (typeof request.model === 'string' && request.model !== '' && request.model !== name) return `cannot use own model - must be: ${name}`;
  if (!name && route !== 'preserve') return 'model parameter not found in request, nor in gateway configuration';
  if (name && !config.model.name && !MODEL_NAME.test(name)) return `model parameter '${name.slice(0, 100)}' is not a model name`;
  if (route !== 'preserve') {
    const problem = incompatibility(request, route);
    if (problem) return problem;
  }
  if ((request.stream || config.response_streaming === 'always') && config.response_streaming === 'deny') return 'response streaming is not enabled for this LLM';
  return undefined;
}

function hasPrompts(request: OpenAiRequest): boolean {
  return (Array.isArray(request.messages) && request.messages.length > 0) || typeof request.prompt === 'string';
}

/** Kong's identify_request and is_compatible: the request's own format against the route's. */
function incompatibility(request: OpenAiRequest, route: TranslatedRoute): string | undefined {
  const formats: RouteType[] = [];
  if (Array.isArray(request.messages) && request.messages.length > 0) formats.push('llm/v1/chat');
  if (typeof request.prompt === 'string') formats.push('llm/v1/completions');
  if (formats.length > 1) return 'request matches multiple LLM request formats';
  if (formats.length === 0) return 'request format not recognised';
  return formats[0] === route ? undefined : `[${formats[0]}] message format is not compatible with [${route}] route type`;
}

/** A stream this provider's answers cannot be translated from (Kong's from_format message), or undefined. */
function streamProblem(driver: Driver, model: Model, route: RouteType): string | undefined {
  if (route === 'preserve' || !driver.stream || driver.stream.routes.includes(route)) return undefined;
  return `no transformer available from format ${model.provider}://stream/${route}`;
}

/** Kong's `param_location: body`: the configured parameter, unless the client sent one and may override it. */
function bodyAuth(request: OpenAiRequest, config: AiProxyConfig): Record<string, string> {
  const auth = config.auth;
  if (!auth?.param_name || !auth.param_value || auth.param_location !== 'body') return {};
  if (request[auth.param_name] !== undefined && auth.allow_override) return {};
  return { [auth.param_name]: auth.param_value };
}

/** Kong's configure_request: the provider's endpoint, its headers and query, and the auth (or the signature). */
function sendToProvider(ctx: AccessContext, config: AiProxyConfig, driver: Driver, model: Model, sent: { stream: boolean; body: Buffer }): void {
  const url = endpoint(config, driver, model, sent.stream);
  if (url) ctx.setUpstreamUrl(url);
  for (const [name, value] of Object.entries(driver.headers(model))) ctx.setUpstreamHeader(name, value);
  // Translations read the answer: it must come uncompressed.
  ctx.removeUpstreamHeader('accept-encoding');
  if (driver.sign && url) return signed(ctx, config, driver, model, { method: ctx.method, url, body: sent.body });
  const auth = config.auth;
  if (auth?.header_name && auth.header_value && !(auth.allow_override && ctx.headers[auth.header_name.toLowerCase()] !== undefined)) {
    ctx.setUpstreamHeader(auth.header_name, auth.header_value);
  }
  const query = new URLSearchParams(ctx.rawQuery);
  const added = { ...driver.query?.(model, ctx.query) };
  if (auth?.param_name && auth.param_value && auth.param_location === 'query' && !(auth.allow_override && ctx.query.has(auth.param_name))) {
    added[auth.param_name] = auth.param_value;
  }
  if (Object.keys(added).length === 0) return;
  for (const [name, value] of Object.entries(added)) query.set(name, value);
  ctx.setUpstreamQuery(query.toString());
}

/** upstream_url (through the driver's configuredUrl), else the provider's own endpoint; upstream_path replaces the path. */
function endpoint(config: AiProxyConfig, driver: Driver, model: Model, stream: boolean): URL | undefined {
  const { upstream_url: configured, upstream_path: path } = model.options;
  const href = configured ? (driver.configuredUrl?.(configured, config.route_type) ?? configured) : driver.defaultUrl(config.route_type, model, stream);
  if (href === undefined) return undefined;
  const url = new URL(href);
  if (path && !configured) url.pathname = path;
  return url;
}

/** A signed request goes exactly as signed: to that host, without the client's query. */
function signed(ctx: AccessContext, config: AiProxyConfig, driver: Driver, model: Model, request: OutgoingRequest): void {
  const headers = driver.sign!(request, model, config.auth);
  // Kong's answer when the cloud identity fails (the credentials left the environment since the config loaded).
  if (!headers) return ctx.respond(500, { error: { message: 'LLM request failed before proxying' } });
  ctx.setUpstreamQuery('');
  ctx.setUpstreamHeader('host', request.url.host);
  for (const [name, value] of Object.entries(headers)) ctx.setUpstreamHeader(name, value);
}

function refuse(ctx: AccessContext, message: string): void {
  ctx.respond(400, { error: { message } });
}

/** Kong's serialize-analytics: `ai.proxy.meta`, `ai.proxy.usage` and, with log_payloads, the request. */
function logStatistics(ctx: LogContext, config: AiProxyConfig, driver: Driver, { model, facts, requestBody }: Proxied): void {
  const meta = {
    provider_name: model.provider,
    request_model: model.name || 'UNSPECIFIED',
    response_model: facts.model ?? (model.name || 'UNSPECIFIED'),
    ...driver.logMeta?.(model),
  };
  const { input_cost: inputCost, output_cost: outputCost } = model.options;
  const usage = facts.usage && {
    ...facts.usage,
    cost: inputCost && outputCost ? (facts.usage.prompt_tokens * inputCost + facts.usage.completion_tokens * outputCost) / 1_000_000 : 0,
  };
  ctx.setLogValue('ai', { proxy: { meta, usage, ...(config.logging.log_payloads ? { payload: { request: requestBody } } : {}) } });
}
