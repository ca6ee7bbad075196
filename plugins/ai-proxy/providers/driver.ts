/**
 * What a provider's driver does (Kong's kong/llm/drivers/<provider>.lua): where it serves each route
 * type, its request body for the client's OpenAI-format one, and the OpenAI-format answer for its own,
 * whole or as a stream of events.
 */
import { parseUntrustedJson } from '../../../src/pdk/index.ts';
import type { Framing, StreamEvent } from '../framing.ts';
import type { OpenAiRequest } from '../request.ts';
import type { AiProxyConfig, ModelConfig, RouteType } from '../schema.ts';

export type { OpenAiRequest, StreamEvent };

export type TranslatedRoute = 'llm/v1/chat' | 'llm/v1/completions';

/** The model a request runs on: the config's, its name settled (from the config or the request). */
export interface Model {
  provider: string;
  name: string;
  options: NonNullable<ModelConfig['options']> | Record<string, never>;
}

/** Token counts an answer reported (OpenAI's names). */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** An answer translated to OpenAI's format, or why it could not be (Kong's message). */
export type Translated = { body: Record<string, unknown>; usage?: Usage } | { error: string };

/** Turns a provider's stream into OpenAI's, event by event: the `data` payloads to send (`[DONE]` last). */
export interface StreamTranslator {
  translate(event: StreamEvent): string[];
  /** What to send once the provider's stream ended, for a framing whose end is the stream's (Gemini's array). */
  finish?(): string[];
  /** Token counts seen so far. */
  usage(): Usage | undefined;
}

/** What goes to the provider, for a driver that signs it (bedrock). */
export interface OutgoingRequest {
  method: string;
  url: URL;
  body: Buffer;
}

export interface Driver {
  /** The route types translated (Kong's transformers); a config with another is refused when it loads. */
  routes: readonly TranslatedRoute[];
  /**
   * The provider's own endpoint for this request (Kong's upstream_url_format and operation_map), or
   * undefined for a self-hosted one (upstream_url required). `stream`: the request asked for a stream.
   */
  defaultUrl(route: RouteType, model: Model, stream: boolean): string | undefined;
  /** The endpoint under a configured upstream_url (default: upstream_url itself). */
  configuredUrl?(upstreamUrl: string, route: RouteType): string;
  /** Headers the provider needs besides the configured auth. */
  headers(model: Model): Record<string, string>;
  /** Query parameters the provider needs besides the auth (azure's api-version), given the client's. */
  query?(model: Model, clientQuery: URLSearchParams): Record<string, string>;
  /** The provider's body for the client's request, or Kong's message for one it cannot translate (a 400). */
  toProvider(request: OpenAiRequest, model: Model, route: TranslatedRoute): Record<string, unknown> | { refusal: string };
  /** Undefined when the provider already answers in OpenAI's format: the answer passes unchanged. */
  fromProvider?(answer: unknown, model: Model, route: TranslatedRoute): Translated;
  /**
   * How the provider frames a stream, the route types whose streams are translated, and the translation
   * of their events (none: OpenAI's, passed through).
   */
  stream?: { framing: Framing; routes: readonly TranslatedRoute[]; translator(model: Model, route: TranslatedRoute): StreamTranslator };
  /**
   * The headers that sign the request as it goes (bedrock's SigV4), or undefined without credentials; the
   * client's query is then not sent (the signature covers the request exactly).
   */
  sign?(request: OutgoingRequest, model: Model, auth: AiProxyConfig['auth']): Record<string, string> | undefined;
  /** What log_statistics adds to `ai.proxy.meta` for this provider (azure's instance, deployment and version). */
  logMeta?(model: Model): Record<string, unknown>;
  /** Why this config cannot be served (checked when it loads), beyond the schema's checks. */
  configProblem?(config: AiProxyConfig): string | undefined;
}

/** Kong's merge_config_defaults: the configured model options win over the request's. */
export function withConfigDefaults(request: OpenAiRequest, model: Model): OpenAiRequest {
  const { options } = model;
  return {
    ...request,
    temperature: options.temperature ?? request.temperature,
    max_tokens: options.max_tokens ?? request.max_tokens,
    top_p: options.top_p ?? request.top_p,
    top_k: options.top_k ?? request.top_k,
  };
}

export function usageOf(prompt: unknown, completion: unknown): Usage {
  const count = (n: unknown) => (typeof n === 'number' && Number.isSafeInteger(n) && n >= 0 ? n : 0);
  return { prompt_tokens: count(prompt), completion_tokens: count(completion), total_tokens: count(prompt) + count(completion) };
}

/** An OpenAI stream chunk's data, as Kong frames translated events. */
export function chunkData(chunk: Record<string, unknown>): string {
  return JSON.stringify(chunk);
}

/** OpenAI's `stream_options.include_usage` chunk: how the client (and metering) learns a stream's token counts. */
export function usageChunk(id: unknown, model: string, usage: Usage): string {
  return JSON.stringify({ id, object: 'chat.completion.chunk', model, choices: [], usage });
}

export const DONE = '[DONE]';

export function isObject(value: unknown): value is Record<string, any> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A stream event's JSON object, or undefined for one that is not (Kong skips it). */
export function parsedEvent(data: string): Record<string, any> | undefined {
  try {
    const parsed = parseUntrustedJson(data);
    return isObject(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}
